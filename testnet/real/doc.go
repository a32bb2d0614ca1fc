// Package real runs meshllm's experiments against real peers: Up starts N
// `meshllm join --loopback` processes on this machine (one bootstrap peer,
// the others joining through it) and waits until every peer's /v1/mesh
// lists all the others; Run drives running peers through their OpenAI API
// with the same workloads and arrivals as the simulated harness
// (testnet/workload, testnet/simnet) and measures the same metrics, so
// simulated and real results can be set side by side.
//
// What Run measures, and from where:
//
//   - latency and TTFT: the client's send to the last and the first streamed
//     piece (POST /v1/completions with stream and include_usage);
//   - token and request hit rates: usage.prompt_tokens_details.cached_tokens
//     of each reply (a request hits when at least Config.Block tokens were
//     cached, the simulated harness's rule);
//   - fraction forwarded, traffic share per peer (overall and per window):
//     each peer's Prometheus counters at /metrics, read before, during and
//     after the run: meshllm_router_served_total{where} counts the requests
//     a peer received by where they were served, and
//     meshllm_router_forwarded_in_total{outcome="served"} the ones it served
//     for others. A reply does not say which peer served it, so shares come
//     from these counters, not from individual requests.
//
// Prompts are sent as token IDs (the workload's simulated tokenizer, with
// the model's vocabulary size), so a real peer and a simulated one see the
// same tokens and the same shared prefixes.
//
// Concurrency: Run starts one goroutine per open-loop session (or per
// closed-loop client) and one sampling goroutine; it returns after all have
// ended. A Testnet's methods are safe for concurrent use.
package real
