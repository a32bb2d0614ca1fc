// Package httpapi is a peer's HTTP API: Server serves the OpenAI and Ollama
// dialects over one Generator (an infer.Engine as it is, or the mesh router
// in front of one; the package does not import the router).
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
// Besides them: GET /metrics (Prometheus, one registry per Server),
// GET /healthz, and what WithRoute and WithDashboard mount. Every error
// leaves in the shape of the API it belongs to, with the status codes
// documented in docs/api.md.
//
// Concurrency: a Server is safe for concurrent use once NewServer returns;
// its handlers run on net/http's goroutines and share only the Generator
// (which must be safe for concurrent use) and the Prometheus collectors.
// A request's context is the generation's context: a client that
// disconnects cancels its generation. There are no package-level variables
// holding state, so many Servers can run in one process.
package httpapi
