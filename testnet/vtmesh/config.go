package vtmesh

import (
	"fmt"
	"time"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/simnet"
)

// Config describes a virtual-time cluster. Its zero fields take the
// defaults of simnet.Config, so the same Config values describe the same
// experiment in both harnesses.
type Config struct {
	// Peers is the number of peers (at least 1).
	Peers int
	// Profile is every peer's engine cost model; CacheTokens, when > 0,
	// sets its KV capacity in tokens (Profile.CacheCells).
	Profile     sim.Profile
	CacheTokens int
	// Running is how many requests an engine runs at once (0: all of
	// Profile.Slots), as simnet.Config's Running and sim.Options.
	Running int
	// Link is every link's one-way latency.
	Link time.Duration
	// Bandwidth is each peer's uplink and downlink in bytes per second;
	// 0 means 12.5e6 (100 Mbit/s), simnet's default.
	Bandwidth float64
	// Forward false runs the `local` policy: routers without a forwarder,
	// every request served where it enters (gossip still runs). True runs
	// `meshllm`: node.Decide over the gossiped view.
	Forward bool
	// Node is the routing policy; the zero value means
	// simnet.DefaultNodePolicy (node.DefaultPolicy with the profile's
	// speeds and the link bandwidth).
	Node node.Policy
	// Announce is the gossip interval (0: 1 s), SnapshotEvery the full
	// snapshot period in intervals (0: 10), as node.AnnounceConfig.
	Announce      time.Duration
	SnapshotEvery int
	// PingInterval is the RTT pinger's period (0: 10 s, the p2p default).
	PingInterval time.Duration
	// Churn makes peers leave and come back during Run, with simnet's
	// meaning: At is from Run's start; a leaving peer's host closes (its
	// connections drop and the streams it was serving reset, so origins
	// fall back), it takes no new requests (they enter at the next live
	// peer) and finishes its own clients' requests; a returning peer
	// starts a new host with the same identity and address, an empty
	// cache and a new digest epoch, and connects to every live peer.
	Churn []simnet.Churn
	// Warmup is the virtual time between connecting the peers and the
	// first request (0: 3 s): GossipSub meshes form, the first pings and
	// loads arrive.
	Warmup time.Duration
}

// withDefaults fills cfg's zero fields in and checks the rest; the fields
// it shares with simnet.Config take simnet's defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Peers < 1 {
		return cfg, fmt.Errorf("vtmesh: %d peers", cfg.Peers)
	}
	for _, ch := range cfg.Churn {
		if ch.Peer < 0 || ch.Peer >= cfg.Peers || ch.At < 0 {
			return cfg, fmt.Errorf("vtmesh: bad churn event %+v", ch)
		}
	}
	if cfg.Link < 0 || cfg.Bandwidth < 0 || cfg.Running < 0 {
		return cfg, fmt.Errorf("vtmesh: negative link latency, bandwidth or running")
	}
	sc, err := cfg.simnet().WithDefaults()
	if err != nil {
		return cfg, err
	}
	cfg.Profile, cfg.Node = sc.Profiles[0], sc.Node
	cfg.Announce, cfg.SnapshotEvery = sc.Announce, sc.SnapshotEvery
	cfg.Bandwidth = sc.Net.BytesPerSecond()
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 10 * time.Second
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3 * time.Second
	}
	return cfg, nil
}

// Simnet returns the simnet.Config of the same experiment, for running it
// in the discrete-event simulation side by side.
func (cfg Config) Simnet() simnet.Config { return cfg.simnet() }

func (cfg Config) simnet() simnet.Config {
	return simnet.Config{
		Peers: cfg.Peers, Profile: cfg.Profile, CacheTokens: cfg.CacheTokens, Running: cfg.Running,
		Net:  simnet.Network{Link: cfg.Link, Bandwidth: cfg.Bandwidth},
		Node: cfg.Node, Announce: cfg.Announce, SnapshotEvery: cfg.SnapshotEvery, Churn: cfg.Churn,
	}
}
