// Package workload generates the request streams of meshllm's experiments,
// seeded and reproducible: the same Config and seed give the same requests,
// token for token, on every machine.
//
// Three shapes are built in:
//
//   - MMLU 5-shot (the seed paper's workload): each request is a test
//     question after its subject's five answered examples; subjects are
//     drawn uniformly or with Zipf(s) popularity.
//   - Multi-turn chat: conversations whose prompt is the whole history so
//     far (a shared system prompt, then user and assistant turns); a user
//     sends the next turn a pause after the previous reply, and now and then
//     leaves for a long while before coming back.
//   - Shared system prompt: G groups, each with a system prompt of S tokens
//     shared by its questions of Q tokens (the shape of SGLang's
//     generated-shared-prefix benchmark).
//
// A Workload is a list of sessions; a session is a list of requests that
// must run one after another (a conversation's turns, or a closed-loop
// client's requests), each starting a think time after the previous one
// completed. Arrivals decide when sessions start: Poisson at a rate (open
// loop), or C closed-loop clients that each run their share of the sessions
// back to back. Every session enters the mesh at one peer, drawn uniformly.
//
// Concurrency: generators are plain functions; a Workload is immutable once
// built and safe for concurrent reading.
package workload
