package real

import (
	"os/exec"
	"syscall"
)

// setParentDeath makes the kernel end the child when the process that
// started it dies, so a killed `meshllm testnet up` leaves no peers behind.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
