// Package sim is a deterministic cost-model engine: a drop-in infer.Engine
// whose prefill and decode take the time a Profile says, so that experiments
// with many peers run in one process, fast, and — under testing/synctest —
// in virtual time.
//
// The engine keeps a real prefix cache (infer.Slots over cache.Tree, with a
// no-op KV), so cached-token counts, LRU eviction and queueing behave as in
// the llama.cpp engine; only the arithmetic is replaced by time.Sleep. Its
// tokenizer hashes words and punctuation into the vocabulary (same text,
// same tokens; a text's tokens are a prefix of the tokens of any text that
// extends it at a word boundary), and its replies are pseudo-random words
// drawn from (seed, prompt), so equal requests get equal replies.
//
// A Profile is measured on a real engine by Calibrate (`meshllm calibrate`),
// which fits the cost model by least squares; Presets ship figures for a
// 0.5B model on two CPU cores and on a GPU. docs/sim.md describes the model
// and its fit.
//
// Concurrency: Engine is safe for concurrent use, like every infer.Engine.
// Profile is a plain value. Calibrate drives one engine sequentially.
package sim
