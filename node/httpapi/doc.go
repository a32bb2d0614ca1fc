// Package httpapi is a peer's HTTP API: Server serves the OpenAI and Ollama
// dialects over one Generator (an infer.Engine as it is, or the mesh router
// in front of one; the package does not import the router).
//
//   - OpenAI: POST /v1/chat/completions (tools and tool_choice, tool_calls,
//     response_format json_object/json_schema, logprobs, penalties),
//     POST /v1/completions, POST /v1/embeddings, POST /v1/responses (SSE
//     streaming, or one JSON object), GET /v1/models and
//     GET /v1/models/{id}. usage carries prompt_tokens_details.cached_tokens;
//     a "timings" object (llama.cpp server's names) carries prefill and
//     decode times and speeds.
//   - Ollama: POST /api/generate, POST /api/chat (tools, format, NDJSON
//     streaming by default, or one JSON object), POST /api/embed and the
//     legacy POST /api/embeddings, GET /api/tags, POST /api/show,
//     GET /api/ps, GET /api/version, POST /api/pull (a clear error: models
//     do not come from the mesh yet), GET and HEAD /, with Ollama's timing
//     fields plus "cached_tokens".
//
// Constrained replies (structured outputs, forced tool calls) go to the
// engine as an infer.Constraint, so they hold across a forward too; tool
// calls are rendered and parsed with the model's own chat template and
// tool format (infer.ToolFormat). A chat longer than the context loses its
// oldest turns (truncate.go); max_tokens beyond the room left is clamped.
//
// Besides them: GET /metrics (Prometheus, one registry per Server),
// GET /healthz, and what WithRoute and WithDashboard mount. Before any
// handler runs, a request's Host (on a loopback listener) and its Origin
// are checked (origin.go, origin_cors.go): browsers on other sites get
// 403, allowed origins get CORS answers, and the dashboard and mounted
// routes are same-origin only. Every error leaves in the shape of the API
// it belongs to, with the status codes documented in docs/api.md.
//
// Concurrency: a Server is safe for concurrent use once NewServer returns;
// its handlers run on net/http's goroutines and share only the Generator
// (which must be safe for concurrent use), the Prometheus collectors and
// the keep-alive expiry that /api/ps reports (behind its own mutex). A
// request's context is the generation's context: a client that
// disconnects cancels its generation. There are no package-level variables
// holding state, so many Servers can run in one process.
package httpapi
