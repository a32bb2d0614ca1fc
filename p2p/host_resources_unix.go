//go:build unix

package p2p

import "syscall"

// systemFDs returns the process's soft limit on open files, or 0.
func systemFDs() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return int(min(l.Cur, 1<<20))
}
