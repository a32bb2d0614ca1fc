// Package node is one meshllm peer: its HTTP API (Server), and the router
// that decides whether a request is served locally or forwarded to the peer
// holding the longest cached prefix (Decide over a View, under a Policy).
//
// The HTTP API speaks two dialects over one Generator:
//
//   - OpenAI: POST /v1/chat/completions, POST /v1/completions (SSE streaming
//     ending in "data: [DONE]", or one JSON object), GET /v1/models and
//     GET /v1/models/{id}. usage carries prompt_tokens_details.cached_tokens;
//     a "timings" object (llama.cpp server's names) carries prefill and
//     decode times and speeds.
//   - Ollama: POST /api/generate, POST /api/chat (NDJSON streaming by
//     default, or one JSON object), GET /api/tags, POST /api/show,
//     GET /api/ps, GET /api/version, GET and HEAD /, with Ollama's timing
//     fields plus "cached_tokens".
//
// Besides them: GET /metrics (Prometheus, one registry per Server) and
// GET /healthz. Every error leaves in the shape of the API it belongs to,
// with the status codes documented in docs/api.md.
//
// Every generation goes through the Generator interface, which an
// infer.Engine satisfies as it is; the mesh router implements it too and
// sits between the handlers and the engine. docs/api.md documents the
// endpoints, fields, errors and defaults.
//
// The mesh side: Mesh holds this peer's view of the others (cache-digest
// replicas in a cache.ClusterView, load announcements, RTTs, cooldowns);
// Router implements Generator by asking Decide where a request is served
// fastest and forwarding it through a Forwarder (the p2p stream, wired in
// cmd/meshllm), falling back to the next candidate or to local serving,
// and weighing each peer by Trust (do its cache claims hold?). Announce
// publishes this peer's digest deltas and load through an Announcer.
// Dashboard serves the live page at / and /ui/ (server-sent events).
// node never imports libp2p or p2p (deps_test.go enforces it).
//
// Concurrency: Decide is a pure function. A Server is safe for concurrent use once NewServer returns;
// its handlers run on net/http's goroutines and share only the Generator
// (which must be safe for concurrent use) and the Prometheus collectors.
// A request's context is the generation's context: a client that
// disconnects cancels its generation. There are no package-level variables
// holding state, so many Servers can run in one process.
package node
