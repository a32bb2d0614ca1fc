// Package vtmesh runs a cluster of complete meshllm peers — the real p2p
// code (GossipSub with the digest validators and peer scoring, the
// /meshllm/infer/1.0.0 request streams, snapshot pulls, libp2p ping RTT
// estimates), the real node code (Router with its goroutines, watchdogs and
// fallbacks, Mesh, Announce) and the real cache code — over a simulated
// network in virtual time. Only the engine (infer/sim) and the network are
// simulated: every peer is a libp2p host on QUIC over
// github.com/marcopolo/simnet (through go-libp2p's x/simlibp2p), whose
// links add a one-way latency and a bandwidth limit to every packet.
//
// It runs inside a testing/synctest bubble: time moves only when every
// goroutine of the cluster is blocked, so a run with 1000 ms links costs
// only the CPU the code itself uses. That is why it is a test-time harness
// (synctest.Test needs a *testing.T) and `meshllm bench` uses the
// discrete-event simulation of package simnet instead; this package checks
// that simulation against the real peers on the same workloads (see
// TestAgreesWithSimnet and docs/results.md, "Real p2p code in virtual
// time").
//
// What differs from `meshllm join`: peers are connected all-to-all at the
// start (no DHT, mDNS or NAT traversal — discovery is not what is being
// measured), the hosts are QUIC-only with no resource manager, and the HTTP
// API is skipped (requests enter through each peer's Router, as the API
// handlers do). Peers can leave and come back mid-run (Config.Churn).
// Identities come from a fixed seed, so a run repeats up to the order in
// which the bubble's goroutines are scheduled.
//
// Concurrency: Start, Run and Close must be called from inside one
// synctest bubble (synctest.Test); a Cluster's peers run on goroutines of
// that bubble and Close stops them all. There is no global state.
package vtmesh
