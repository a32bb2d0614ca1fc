// Package node is one meshllm peer's router: it decides whether a request
// is served locally or forwarded to the peer holding the longest cached
// prefix (Decide over a View, under a Policy).
//
// Mesh holds this peer's view of the others (cache-digest replicas in a
// cache.ClusterView, load announcements, RTTs, cooldowns); Router serves a
// request (it satisfies node/httpapi's Generator) by asking Decide where it
// is served fastest and forwarding it through a Forwarder (the p2p stream,
// wired in cmd/meshllm), falling back to the next candidate or to local
// serving, and weighing each peer by Trust (do its cache claims hold?).
// Announce publishes this peer's digest deltas and load through an
// Announcer. The HTTP API (node/httpapi) and the dashboard (node/dashboard)
// sit above the router; node imports neither, nor libp2p, p2p or the cgo
// engine (testnet/layout enforces it).
//
// Concurrency: Decide is a pure function. Mesh, Router, Trust and Announce
// are safe for concurrent use (each type's doc says how), and none of
// them holds a lock across IO. There are no package-level variables
// holding state, so many peers can run in one process.
package node
