//go:build !linux

package llama

// availableMemory is unknown off Linux: the budget falls back to
// fallbackBudget (set Config.KVBudget to use more).
func availableMemory() (int64, bool) { return 0, false }
