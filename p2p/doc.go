// Package p2p is a meshllm peer's network side, on libp2p: the host and its
// identity, discovery of other peers, NAT traversal, round-trip
// estimates, digest gossip and the request streams.
//
// # Host
//
// New starts a Host from a Config. DefaultConfig is a volunteer desktop on
// the internet (TCP and QUIC on port 4002, NAT traversal on, mDNS on,
// modest resource limits); LoopbackConfig is a testnet of many peers on
// one machine (127.0.0.1, ephemeral ports, every peer a DHT server,
// nothing that reaches past the machine). Every default is explained
// where it is set, and docs/operations-p2p.md has the operator's view.
//
// The identity is an Ed25519 key in DataDir/identity.key (mode 0600; see
// LoadOrCreateIdentity), so a peer keeps its PeerID across restarts.
//
// # Discovery
//
// A peer joins through bootstrap peers (Config.BootstrapPeers; dialed in
// the background with backoff, and again whenever the peer has too few
// connections; Host.Bootstrapped says when the first succeeded). Peers
// serving a model find each other in the Kademlia DHT, which runs under
// the project's own protocol prefix (/meshllm/kad/1.0.0), by rendezvous
// on ModelNamespace(model): JoinNamespace advertises and keeps connecting
// to what it finds. On a LAN, mDNS finds peers with no bootstrap peer.
// SubscribePeers reports connects and disconnects to other layers.
//
// A bootstrap peer (Config.BootstrapNode) runs the DHT as a server and
// offers AutoNAT and circuit-relay v2 to the others. Other peers map
// ports (UPnP, NAT-PMP), learn their reachability (AutoNAT v2), reserve
// relay slots on the bootstrap peers when unreachable, and upgrade relayed
// connections to direct ones by hole punching.
//
// # Round trips
//
// RTTEstimator keeps a per-peer round-trip estimate (a windowed minimum
// plus a spike-capped EWMA; the type's doc says why) fed by libp2p pings
// to every connected peer and by stream timings (Host.ObserveRTT). The
// router charges it to every forwarded request.
//
// # Concurrency
//
// Host and RTTEstimator are safe for concurrent use. A Host owns its
// goroutines (bootstrap, namespace discovery, pinging, mDNS, event
// forwarding) and Close stops and waits for all of them. The package has
// no global state: any number of hosts run in one process.
package p2p
