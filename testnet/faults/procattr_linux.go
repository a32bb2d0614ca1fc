package faults

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL the peer process when the
// process that started it dies, so a crashed or killed test run leaves no
// peers behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
