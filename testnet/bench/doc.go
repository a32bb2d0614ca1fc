// Package bench runs meshllm's routing experiments: named scenarios (the
// seed paper's, sweeps of link latency, skew, cache size and scale,
// heterogeneous peers, churn), each a grid of cells (workload x skew x link
// latency x cache size x peers) run under every requested policy through
// the simnet harness, and writes the results as a table, JSON, CSV, a
// markdown report and PNG plots. `meshllm bench` is its command line.
//
// Concurrency: Run uses up to Options.Workers goroutines, one cell-policy
// run each (runs are independent and deterministic, so the output does not
// depend on the worker count); everything else is single-goroutine.
package bench
