package bench

import (
	"github.com/meshllm/meshllm/infer/sim"
)

// PaperProfile is the cost model of the `paper` scenario: a 0.5B-class
// model on which a cold MMLU 5-shot prompt (about 590 tokens with the
// simulated tokenizer) takes about 0.3 s, as in the seed paper. It keeps
// up to 256 cached sequences in its KV cache (a unified cache holding many
// prefixes; KV cells, set by --cache-tokens, bound it first); Options
// Running says how many run at once.
func PaperProfile() sim.Profile {
	return sim.Profile{
		Name:          "paper-0.5b",
		Description:   "0.5B-class model: cold 590-token MMLU 5-shot prompt in ~0.29 s (~2200 prefill tok/s), 100 decode tok/s",
		Parameters:    494032768,
		ContextLength: 4096, VocabSize: 151936,
		Slots: 256, Parallel: 1, QueueLimit: 1 << 16, BatchTokens: 512,
		PrefillBase:      0.020,
		PrefillToken:     0.00045,
		PrefillAttention: 10e-9,
		DecodeToken:      0.010,
		DecodeAttention:  1e-9,
	}
}

// LoadProfile returns PaperProfile for "paper-0.5b", else sim.LoadProfile
// (a preset name or a JSON file from `meshllm calibrate`).
func LoadProfile(name string) (sim.Profile, error) {
	if name == "" || name == "paper-0.5b" {
		return PaperProfile(), nil
	}
	return sim.LoadProfile(name)
}

// slowed returns p with prefill and decode k times slower (a weaker peer).
func slowed(p sim.Profile, k float64) sim.Profile {
	p.Name += "-slow"
	p.PrefillBase *= k
	p.PrefillToken *= k
	p.PrefillAttention *= k
	p.DecodeToken *= k
	p.DecodeAttention *= k
	return p
}
