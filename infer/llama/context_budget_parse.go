package llama

import (
	"bytes"
	"strconv"
)

// parseMemAvailable finds "MemAvailable: N kB" in /proc/meminfo's text and
// returns N KiB in bytes.
func parseMemAvailable(meminfo []byte) (int64, bool) {
	for line := range bytes.Lines(meminfo) {
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// cgroupRemaining is a cgroup v2 memory.max less memory.current; ok is
// false when there is no limit ("max") or the files do not parse.
func cgroupRemaining(maxText, currentText []byte) (int64, bool) {
	lim, err := strconv.ParseInt(string(bytes.TrimSpace(maxText)), 10, 64)
	if err != nil || lim <= 0 {
		return 0, false
	}
	cur, err := strconv.ParseInt(string(bytes.TrimSpace(currentText)), 10, 64)
	if err != nil || cur < 0 {
		return 0, false
	}
	return max(lim-cur, 0), true
}
