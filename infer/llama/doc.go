// Package llama is the real inference engine: llama.cpp through cgo
// (github.com/ollama/ollama/llama), implementing infer.Engine.
//
// It is the only package in the tree that links llama.cpp. Build it with the
// flags from scripts/engine-env.sh (the Makefile does): without them ggml is
// compiled without SIMD and runs 7-21x slower.
//
// # Scheduling: continuous batching
//
// One goroutine (the loop) owns the llama context, the batch and the
// infer.Slots. Each step it admits queued requests into idle slots, then
// builds ONE batch holding the next token of every decoding sequence plus
// prompt chunks of sequences still prefilling, and decodes it. Decoding is
// memory-bound, so several sequences decode for about the price of one;
// prefill chunks ride along so a long prompt does not stall running replies.
// Requests beyond the slots wait in a bounded FIFO queue (Config.QueueLimit);
// past it Generate fails fast with infer.ErrBusy so a router can go elsewhere.
//
// # KV slots and prefix reuse
//
// The context uses a unified KV cache: slot i is sequence id i, and a prefix
// copied from slot s into slot d (llama_memory_seq_cp) shares s's cells
// instead of duplicating them. infer.Slots picks the slot with the longest
// cached prefix in ANY slot and evicts least-recently-used idle slots when KV
// cells run out; its radix tree is exactly what the KV cache holds.
//
// Concurrency: Engine methods are safe for concurrent use. Emit callbacks run
// on the caller's goroutine, never on the loop, so a slow client cannot stall
// the batch.
package llama
