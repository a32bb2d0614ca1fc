package sim

// Preset returns a built-in profile by name; see Presets.
func Preset(name string) (Profile, bool) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// Presets returns the built-in profiles. The CPU figures are of the kind
// `meshllm calibrate` measures for a 0.5B model on two x86-64 cores with
// the SIMD build (about 100 prefill tokens/s at F32, docs/sim.md); the GPU
// one is a mid-range data-centre GPU's order of magnitude. Calibrate your
// own machine for experiments whose absolute times matter.
func Presets() []Profile {
	return []Profile{
		{
			Name:        "qwen2.5-0.5b-cpu2",
			Description: "Qwen2.5 0.5B (F32) shape on 2 x86-64 cores, llama.cpp with AVX2/FMA: ~100 prefill tok/s, ~8 decode tok/s",
			Parameters:  494032768, ContextLength: 4096, VocabSize: 151936,
			Slots: 4, Parallel: 1, QueueLimit: 16, BatchTokens: 512,
			PrefillBase:      0.020,  // graph setup, sampling, first-token bookkeeping
			PrefillToken:     0.0100, // 2*0.49e9 FLOP/token at ~100 GFLOP/s
			PrefillAttention: 20e-9,  // QK^T and AV over the cache, 24 layers x 128 KV dims
			DecodeToken:      0.125,  // one pass over 2 GB of F32 weights
			DecodeAttention:  40e-9,
		},
		{
			Name:        "qwen2.5-0.5b-gpu",
			Description: "Qwen2.5 0.5B on one data-centre GPU: ~10k prefill tok/s, ~200 decode tok/s, 16 batched slots",
			Parameters:  494032768, ContextLength: 8192, VocabSize: 151936,
			Slots: 16, Parallel: 16, QueueLimit: 64, BatchTokens: 2048,
			PrefillBase:      0.004,
			PrefillToken:     100e-6,
			PrefillAttention: 1e-9,
			DecodeToken:      0.005,
			DecodeAttention:  0.5e-9,
		},
		{
			Name:        "tiny",
			Description: "a fast toy model for tests and examples: 1 ms per prefill token, 2 ms per decode step",
			Parameters:  260000, ContextLength: 2048, VocabSize: 512,
			Slots: 4, Parallel: 1, QueueLimit: 8, BatchTokens: 512,
			PrefillBase:      0.002,
			PrefillToken:     0.001,
			PrefillAttention: 100e-9,
			DecodeToken:      0.002,
			DecodeAttention:  200e-9,
		},
	}
}
