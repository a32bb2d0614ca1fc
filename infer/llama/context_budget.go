package llama

import (
	"fmt"
	"strings"

	"github.com/meshllm/meshllm/infer"
)

// Context sizing constants.
const (
	// fallbackContext is the context of a model whose GGUF has no
	// <arch>.context_length.
	fallbackContext = 2048
	// minBudgetCells is the floor of a budget-capped KV cache: below it a
	// chat server is useless, so the plan keeps it (or the trained context,
	// if smaller) even when the budget says less.
	minBudgetCells = 2048
	// maxKVCells bounds the KV cache whatever the budget or Config say (a
	// model with no per-token KV cost, or a hostile trained context).
	maxKVCells = 1 << 22
	// kvCellPad is llama.cpp's rounding of n_ctx: it allocates cells in
	// multiples of 256, so a budget-capped plan rounds down to one.
	kvCellPad = 256
)

// ContextPlan is how Load sized the served context and the KV cache, for
// the CLI to print at startup (String) and operators to inspect. It is a
// plain value.
type ContextPlan struct {
	// ContextLength is the most tokens (prompt + reply) one request may use.
	ContextLength int `json:"context_length"`
	// TrainContext is the model's trained context (0: the GGUF has none).
	TrainContext int `json:"train_context"`
	// Slots is the number of KV slots sharing the cells.
	Slots int `json:"slots"`
	// KVCells is the KV cache size in tokens, shared by the slots.
	KVCells int `json:"kv_cells"`
	// KVBytesPerCell is what one cached token costs, over all layers:
	// n_layer × (n_embd_k_gqa + n_embd_v_gqa) × bytes of the KV type.
	KVBytesPerCell int64 `json:"kv_bytes_per_cell"`
	// KVBytes is the KV cache's size: KVCells (rounded up to llama.cpp's
	// 256) × KVBytesPerCell.
	KVBytes int64 `json:"kv_bytes"`
	// Budget is the most bytes the KV cache was allowed (Config.KVBudget).
	Budget int64 `json:"budget"`
	// BudgetSource says how Budget was chosen.
	BudgetSource string `json:"budget_source"`
	// Capped says why ContextLength is below TrainContext, or KVCells below
	// Slots × ContextLength; "" when neither.
	Capped string `json:"capped,omitempty"`
}

// String is the startup line: "context 32768 of 32768 trained; KV cache
// 131072 cells for 4 slots, 1.5 GiB (12 KiB a token) within a budget of
// 9.1 GiB (...)".
func (p ContextPlan) String() string {
	var b strings.Builder
	if p.TrainContext > 0 {
		fmt.Fprintf(&b, "context %d of %d trained", p.ContextLength, p.TrainContext)
	} else {
		fmt.Fprintf(&b, "context %d (trained context unknown)", p.ContextLength)
	}
	if p.Capped != "" {
		fmt.Fprintf(&b, " (capped: %s)", p.Capped)
	}
	slots := "slots"
	if p.Slots == 1 {
		slots = "slot"
	}
	fmt.Fprintf(&b, "; KV cache %d cells for %d %s, %s (%s a token) within a budget of %s",
		p.KVCells, p.Slots, slots, FormatBytes(p.KVBytes), FormatBytes(p.KVBytesPerCell), FormatBytes(p.Budget))
	if p.BudgetSource != "" {
		fmt.Fprintf(&b, " (%s)", p.BudgetSource)
	}
	return b.String()
}

// ContextPlan returns how the engine sized its context and KV cache.
func (e *Engine) ContextPlan() ContextPlan { return e.cfg.plan }

// planInput is what planContext decides from.
type planInput struct {
	trained       int   // the model's trained context; <= 0 unknown
	slots         int   // KV slots (>= 1)
	contextLength int   // Config.ContextLength; 0 chooses
	kvCells       int   // Config.KVCells; 0 chooses
	bytesPerCell  int64 // KV bytes one token costs; 0 unknown (no cap)
	budget        int64 // bytes the KV cache may take
	budgetSource  string
}

// planContext sizes the served context and the KV cache. It is a pure
// function of its input:
//
//   - defaults: the trained context per request and Slots × trained cells,
//     so every slot can hold a full context; when those cells exceed the
//     budget, the cells are what the budget holds (rounded down to 256,
//     at least min(trained, 2048)) and the context is min(trained, cells):
//     one request may still use the whole cache, and requests that do not
//     fit at once wait for cells (infer.Slots evicts idle slots first);
//   - an explicit ContextLength or KVCells wins over the budget, bounded by
//     the trained context (KVCells by Slots × trained);
//   - the context never exceeds the cells; the cells never exceed
//     maxKVCells.
func planContext(in planInput) ContextPlan {
	slots := max(in.slots, 1)
	limit := in.trained // the most one request may use
	if limit <= 0 {
		limit = maxKVCells
	}
	maxCells := int(min(int64(slots)*int64(limit), maxKVCells))
	budgetCells := maxCells
	if in.bytesPerCell > 0 {
		bc := max(in.budget, 0) / in.bytesPerCell
		if bc >= kvCellPad {
			bc -= bc % kvCellPad
		}
		budgetCells = int(min(bc, int64(maxCells)))
	}
	want := in.trained // the default context
	if want <= 0 {
		want = fallbackContext
	}
	want = min(want, maxKVCells)

	ctx, cells := min(in.contextLength, limit, maxKVCells), min(in.kvCells, maxCells)
	full := func(perSlot int) int { return int(min(int64(slots)*int64(perSlot), int64(maxCells))) }
	var why []string
	switch {
	case ctx <= 0 && cells <= 0:
		cells = full(want)
		if cells > budgetCells {
			floor := min(want, minBudgetCells)
			cells = max(budgetCells, floor)
			if budgetCells < floor {
				why = append(why, fmt.Sprintf("the KV memory budget, kept at the %d-token floor", floor))
			} else {
				why = append(why, "the KV memory budget")
			}
		}
		ctx = min(want, cells)
		if len(why) == 0 && ctx < in.trained {
			why = append(why, fmt.Sprintf("the %d-cell bound", maxKVCells))
		}
	case cells <= 0: // explicit context: it wins over the budget
		if ctx < in.trained {
			why = append(why, "Config.ContextLength")
		}
		cells = full(ctx)
		if cells > budgetCells {
			cells = max(budgetCells, ctx)
			why = append(why, "KV cells by the memory budget")
		}
	case ctx <= 0: // explicit cells
		ctx = min(want, cells)
		if ctx < in.trained || cells < full(ctx) {
			why = append(why, "Config.KVCells")
		}
	default:
		cells = max(cells, ctx)
		if ctx < in.trained {
			why = append(why, "Config.ContextLength")
		}
		if cells < full(ctx) {
			why = append(why, "Config.KVCells")
		}
	}
	padded := (int64(cells) + kvCellPad - 1) / kvCellPad * kvCellPad
	return ContextPlan{
		ContextLength:  ctx,
		TrainContext:   max(in.trained, 0),
		Slots:          slots,
		KVCells:        cells,
		KVBytesPerCell: in.bytesPerCell,
		KVBytes:        padded * in.bytesPerCell,
		Budget:         in.budget,
		BudgetSource:   in.budgetSource,
		Capped:         strings.Join(why, "; "),
	}
}

// kvBytesPerCell is what one token of KV cache costs over all layers:
// n_layer × (n_embd_k_gqa + n_embd_v_gqa) × bytes of kvType, from the GGUF
// metadata. Multi-head latent attention caches KVLoraRank + RopeDimensions
// values a layer instead. It over-estimates models whose layers differ
// (per-layer KV head counts count at their maximum; sliding-window layers
// count in full), which keeps the plan on the safe side; recurrent models
// (no attention heads) cost 0 and are never capped.
func kvBytesPerCell(m infer.ModelMeta, kvType string) int64 {
	layers := int64(max(m.BlockCount, 0))
	var elems int64
	if m.KVLoraRank > 0 {
		elems = int64(m.KVLoraRank) + int64(max(m.RopeDimensions, 0))
	} else {
		kv := int64(max(m.HeadCountKV, 0))
		elems = kv * (int64(max(m.KeyLength, 0)) + int64(max(m.ValueLength, 0)))
	}
	num, den := kvTypeSize(kvType)
	return (layers*elems*num + den - 1) / den
}

// kvTypeSize is the bytes of one KV element as num/den: f16 2/1; q8_0 and
// q4_0 store blocks of 32 values in 34 and 18 bytes. Unknown names are f16,
// as the binding's kvCacheTypeFromStr treats them.
func kvTypeSize(kvType string) (num, den int64) {
	switch strings.ToLower(kvType) {
	case "q8_0":
		return 34, 32
	case "q4_0":
		return 18, 32
	default:
		return 2, 1
	}
}

// Budget defaults.
const (
	// budgetNum/budgetDen of the available memory go to model + KV cache;
	// the rest is headroom for llama.cpp's compute buffers, the process and
	// the rest of the machine.
	budgetNum, budgetDen = 3, 4
	// fallbackBudget is the KV budget where available memory is unknown
	// (non-Linux systems).
	fallbackBudget = 4 << 30
)

// defaultKVBudget is the KV budget when Config.KVBudget is unset: 3/4 of
// the available memory (MemAvailable, or the cgroup's remaining limit
// when lower) less the model file's size, since the weights are mapped into
// the same memory; never negative. Without a reading (ok false) it is
// fallbackBudget. With GPU offload the KV cache lives in GPU memory, which
// this does not see: set Config.KVBudget there.
func defaultKVBudget(available int64, ok bool, modelBytes int64) (int64, string) {
	if !ok || available <= 0 {
		return fallbackBudget, "fixed fallback: available memory unknown"
	}
	b := max(available/budgetDen*budgetNum-max(modelBytes, 0), 0)
	return b, fmt.Sprintf("%d/%d of %s available memory less the %s model", budgetNum, budgetDen,
		FormatBytes(available), FormatBytes(modelBytes))
}

// FormatBytes renders n as "384 MiB", "9.1 GiB", "12 KiB", "512 B".
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for (v >= 1024 || v <= -1024) && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 || v >= 10 || v <= -10 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f %s", v, units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
