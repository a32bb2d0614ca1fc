// Package simnet runs a cluster of meshllm peers in virtual time: a
// discrete-event simulation in which each peer is a cost-model engine (the
// sim profile's arithmetic over the real infer.Slots and cache.Tree) plus
// the real routing state of package node — a node.Mesh fed with real
// cache.Source digests and node.Load announcements by the real node.Announce
// loop, node.Speeds, and node.Decide — over a simulated network with a
// one-way latency and a bandwidth per link. Forwarded requests, streamed
// replies, busy answers, gossip digests and snapshot pulls all travel over
// that network, so a peer's view of the others is exactly as stale as the
// links make it.
//
// # Why a discrete-event simulation and not synctest
//
// testing/synctest gives virtual time only inside a test (synctest.Test
// needs a *testing.T), and `meshllm bench` is a command. The simulation
// here is the equivalent for goroutine-free code: one event loop owns all
// state and advances a virtual clock from event to event, so a run with
// 1000 ms links and thousands of requests takes seconds of wall time, and
// equal inputs give equal outputs. What runs in it is the real code where
// the decisions are made — Decide, Mesh, Announce, Source, Replica,
// ClusterView, Slots, Tree — called synchronously; what is replaced is what
// would block: the engine's time.Sleep (engine.go reproduces infer/sim's
// schedule: the same chunked prefill, decode steps and compute-unit FIFO;
// TestEngineMatchesSim checks it against infer/sim under synctest) and the
// node.Router's goroutines (route.go carries a Decision out the way
// Router.execute does: candidates in order, a busy answer puts the peer on
// cooldown, then local). Package testnet/vtmesh runs the same experiments
// on complete peers — libp2p hosts over simulated links, GossipSub, infer
// streams, Routers — inside synctest, and checks that the two agree.
//
// # Policies
//
// Every policy goes through the same harness. `local`, `paper`, `meshllm`
// decide at the request's entry peer from what that peer knows (`paper` and
// `meshllm` from gossip). `random`, `round-robin`, `least-loaded`,
// `consistent-hash`, `sglang` and `oracle` are centralised: they decide as
// if one router saw every peer's exact state without delay, which favours
// them; only the request's and reply's trips over the links are paid.
//
// Concurrency: a Cluster is single-threaded; Run it from one goroutine.
// Independent Clusters may run in parallel: the package has no global state.
package simnet
