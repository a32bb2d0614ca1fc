//go:build linux

package llama

import "os"

// availableMemory reads how much memory the process may still use: Linux's
// MemAvailable, lowered to a cgroup v2 limit's remainder when the process
// runs under one (containers).
func availableMemory() (int64, bool) {
	mi, err := readSmallFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	avail, ok := parseMemAvailable(mi)
	if !ok {
		return 0, false
	}
	lim, lerr := readSmallFile("/sys/fs/cgroup/memory.max")
	cur, cerr := readSmallFile("/sys/fs/cgroup/memory.current")
	if lerr == nil && cerr == nil {
		if left, ok := cgroupRemaining(lim, cur); ok {
			avail = min(avail, left)
		}
	}
	return avail, true
}

// readSmallFile reads at most 64 KiB of a /proc or /sys file.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return nil, err
	}
	return buf[:n], nil
}
