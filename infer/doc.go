// Package infer defines the Engine that a peer serves requests with, and the
// parts every engine shares: requests and sampling parameters, results with
// timings and cached-token counts, typed errors, stop-string handling, chat
// templates, GGUF metadata, and model lookup (by path or in an Ollama store).
//
// Two engines implement Engine:
//
//   - infer/llama: the real llama.cpp engine (cgo). It is the only package in
//     the tree that links llama.cpp, so everything else builds and tests fast
//     and can run under -race.
//   - infer/sim: a deterministic cost-model engine driven by a Profile that
//     `meshllm calibrate` measures on the real engine; experiments use it.
//
// Concurrency: an Engine is safe for concurrent use; Generate may be called
// from many goroutines at once. Everything else in this package is a plain
// value or is documented where it is not.
package infer
