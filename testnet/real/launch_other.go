//go:build !linux

package real

import "os/exec"

// setParentDeath does nothing where the kernel has no parent-death signal:
// Close ends the children.
func setParentDeath(*exec.Cmd) {}
