package p2p

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// DHTMode selects how a peer takes part in the Kademlia DHT.
type DHTMode int

const (
	// DHTAuto answers DHT queries only once AutoNAT says the peer is
	// publicly reachable. A peer that never meets an AutoNAT server stays
	// a client, so a mesh made only of DHTAuto peers has empty routing
	// tables: somebody (the bootstrap peers) must run DHTServer.
	DHTAuto DHTMode = iota
	// DHTServer always answers DHT queries. Bootstrap peers, and every
	// peer of a loopback or LAN testnet, where everyone can dial everyone.
	DHTServer
	// DHTClient only asks. For peers known to be unreachable (mobile,
	// strict NAT) that should not be put into others' routing tables.
	DHTClient
)

// String returns the mode's flag spelling: "auto", "server" or "client".
func (m DHTMode) String() string {
	switch m {
	case DHTAuto:
		return "auto"
	case DHTServer:
		return "server"
	case DHTClient:
		return "client"
	}
	return fmt.Sprintf("DHTMode(%d)", int(m))
}

// ParseDHTMode is the inverse of DHTMode.String.
func ParseDHTMode(s string) (DHTMode, error) {
	switch s {
	case "auto":
		return DHTAuto, nil
	case "server":
		return DHTServer, nil
	case "client":
		return DHTClient, nil
	}
	return 0, fmt.Errorf("p2p: unknown DHT mode %q (want auto, server or client)", s)
}

// Config holds a peer's network settings. Start from DefaultConfig (a
// volunteer desktop on the internet) or LoopbackConfig (many peers on one
// machine) and change what you need; New copies it.
type Config struct {
	// ListenAddrs are the multiaddrs the host listens on (TCP and QUIC).
	ListenAddrs []string

	// BootstrapPeers are full multiaddrs (ending in /p2p/PEERID) of peers
	// to join the mesh through. They are dialed at start and again
	// whenever the peer has too few connections, seed the DHT, and serve
	// as static relays for auto-relay.
	BootstrapPeers []string

	// DataDir holds identity.key. Empty means an ephemeral identity
	// (tests); otherwise the PeerID survives restarts.
	DataDir string

	// Identity, when set, is used instead of DataDir/identity.key.
	Identity crypto.PrivKey

	// BootstrapNode makes this peer a bootstrap/relay peer for others: DHT
	// server, AutoNAT service, circuit-relay v2 service, and it considers
	// itself publicly reachable from the start.
	BootstrapNode bool

	// DHTMode is the DHT role of a peer that is not a BootstrapNode (a
	// BootstrapNode is always DHTServer).
	DHTMode DHTMode

	// EnableMDNS finds peers on the local network by multicast DNS.
	EnableMDNS bool

	// MDNSServiceName is the mDNS service name peers announce; peers with
	// different names do not see each other.
	MDNSServiceName string

	// EnablePortMapping asks the home router for a port mapping (UPnP,
	// NAT-PMP) so that the peer becomes directly dialable.
	EnablePortMapping bool

	// EnableAutoNAT runs the AutoNAT v2 client: peers dial back to tell
	// this one which of its addresses are reachable.
	EnableAutoNAT bool

	// EnableHolePunching coordinates direct connections (DCUtR) over a
	// relayed connection when both peers are behind NATs.
	EnableHolePunching bool

	// EnableRelayClient reserves a slot on the bootstrap peers (static
	// relays) when AutoNAT finds the peer unreachable, and advertises the
	// relayed address.
	EnableRelayClient bool

	// RelayLimitDuration and RelayLimitData bound each connection a
	// BootstrapNode relays (per direction for data). Relayed connections
	// carry gossip and hole-punch coordination, not bulk traffic.
	RelayLimitDuration time.Duration
	RelayLimitData     int64

	// ConnLowWater and ConnHighWater drive the connection manager: above
	// high water it closes the least useful connections (untagged, out of
	// grace) until low water is left.
	ConnLowWater  int
	ConnHighWater int
	// ConnGracePeriod protects a new connection from trimming.
	ConnGracePeriod time.Duration

	// Resources bounds what the libp2p stack may use in total.
	Resources ResourceLimits

	// ConnectionGater, when set, vets every connection (a *Gater: an
	// allowlist of peer IDs, and peers blocked by the membership
	// handshake); nil admits every peer.
	ConnectionGater connmgr.ConnectionGater

	// DialTimeout bounds one dial of a peer (all its addresses).
	DialTimeout time.Duration

	// BootstrapMinPeers: while fewer peers are connected, the bootstrap
	// peers are dialed again (with backoff).
	BootstrapMinPeers int
	// BootstrapRetryMin and BootstrapRetryMax bound the exponential
	// backoff between bootstrap attempts; BootstrapCheckInterval is how
	// often the peer count is checked once bootstrapped.
	BootstrapRetryMin      time.Duration
	BootstrapRetryMax      time.Duration
	BootstrapCheckInterval time.Duration

	// AdvertiseRetryMin and AdvertiseRetryMax bound the backoff between
	// failed DHT advertisements (a fresh peer's routing table is empty).
	AdvertiseRetryMin time.Duration
	AdvertiseRetryMax time.Duration
	// AdvertiseTTL is how long an advertisement is valid; it is renewed
	// at 7/8 of it.
	AdvertiseTTL time.Duration

	// DiscoveryInterval is how often a joined namespace is searched for
	// new peers; the first searches follow the advertise backoff until one
	// finds somebody.
	DiscoveryInterval time.Duration

	// RTT configures the per-peer round-trip estimator and its pinger.
	RTT RTTConfig

	// Metrics, when set, receives libp2p's Prometheus metrics. Nil turns
	// them off (libp2p would otherwise register on the process-global
	// default registry).
	Metrics prometheus.Registerer

	// Logger receives the package's logs; nil discards them.
	Logger *slog.Logger
}

// ResourceLimits bounds the whole libp2p stack of one peer (all
// connections, streams, buffers). Exceeding a limit refuses the new
// connection or stream; nothing already open is harmed.
type ResourceLimits struct {
	// MaxMemory is the memory libp2p may reserve for buffers (yamux
	// windows, QUIC, relay), in bytes. Connection and stream limits scale
	// with it (libp2p's scaling rule: per GiB of memory).
	MaxMemory int64
	// MaxFD is the number of file descriptors libp2p may hold. 0 means
	// half of the process's limit (libp2p's rule).
	MaxFD int
	// MaxConns, MaxConnsInbound cap connections (0 = the scaled value).
	MaxConns        int
	MaxConnsInbound int
	// MaxStreams caps open streams over all peers (0 = the scaled value).
	MaxStreams int
	// MaxStreamsInboundPerPeer caps the inbound streams one remote peer may
	// hold open, negotiating or served (0 = 64). It must stay below the
	// transient scope's inbound limit (160 at the default memory): streams
	// sit in that shared scope until their protocol is negotiated, and with
	// libp2p's scaled per-peer limit (288) one flooding peer could fill it
	// and have every other peer's new streams reset.
	MaxStreamsInboundPerPeer int
	// Protocols caps the inbound streams of meshllm's protocols, over all
	// peers and per peer; nil means DefaultProtocolLimits (infer 128 and
	// 16 a peer, snapshot and membership 64 and 4), an empty map none.
	Protocols map[protocol.ID]ProtocolLimit
}

// RTTConfig configures round-trip estimation.
type RTTConfig struct {
	// PingInterval is the period of pings to each connected peer; 0
	// turns pinging off (stream timings via ObserveRTT still count).
	PingInterval time.Duration
	// PingTimeout bounds one ping round.
	PingTimeout time.Duration
	// PingBurst pings are sent back to back each round; their minimum is
	// one sample (it drops stream set-up and scheduling noise).
	PingBurst int
	// Alpha is the EWMA gain of a new sample (TCP's SRTT uses 1/8).
	Alpha float64
	// MinWindow is the span of the windowed minimum (the path's base
	// RTT). A path that became slower is noticed within it.
	MinWindow time.Duration
	// SpikeFactor caps a sample at SpikeFactor x the windowed minimum
	// before it enters the EWMA, so one stalled ping cannot swing the
	// estimate; 0 disables the cap.
	SpikeFactor float64
	// Now is the estimator's clock; nil means time.Now. Tests inject one.
	Now func() time.Time
}

// DefaultConfig returns the settings of a volunteer desktop joining the
// mesh over the internet. Every default says why.
func DefaultConfig() Config {
	return Config{
		// All IPv4 interfaces, TCP and QUIC on one port number: QUIC hole
		// punches far more often than TCP and saves a round trip on
		// connect; TCP works where UDP is blocked. One fixed port keeps
		// port mappings and firewall rules simple; IPv6 too where present.
		ListenAddrs: []string{
			"/ip4/0.0.0.0/tcp/4002",
			"/ip4/0.0.0.0/udp/4002/quic-v1",
			"/ip6/::/tcp/4002",
			"/ip6/::/udp/4002/quic-v1",
		},
		// None built in: a mesh is private to whoever runs it; pass
		// --bootstrap with the multiaddr a bootstrap peer prints.
		BootstrapPeers: nil,
		// Set by the command (--data-dir); empty = ephemeral identity.
		DataDir: "",
		// A desktop serves a model; bootstrap/relay is an explicit role.
		BootstrapNode: false,
		// Serve the DHT only once AutoNAT says others can dial us, so
		// unreachable peers do not pollute routing tables.
		DHTMode: DHTAuto,
		// Zero-config on a LAN: peers in one home or lab find each other
		// with no bootstrap peer at all.
		EnableMDNS:      true,
		MDNSServiceName: "meshllm",
		// Desktops sit behind home routers: try UPnP/NAT-PMP, learn
		// reachability, punch holes, and fall back to relays.
		EnablePortMapping:  true,
		EnableAutoNAT:      true,
		EnableHolePunching: true,
		EnableRelayClient:  true,
		// 5 min and 1 MiB per relayed connection: plenty for digest gossip
		// and hole-punch coordination between reconnects, too little to
		// turn a volunteer's relay into a bulk proxy (libp2p's defaults,
		// 2 min and 128 KiB, cut gossip too often).
		RelayLimitDuration: 5 * time.Minute,
		RelayLimitData:     1 << 20,
		// A model's mesh of up to ~50 peers stays fully connected (gossip
		// mesh D=6..12 plus DHT neighbours); far below libp2p's 160/192,
		// which are sized for IPFS nodes, not for a machine running an LLM
		// on a home NAT with a limited connection table.
		ConnLowWater:    48,
		ConnHighWater:   96,
		ConnGracePeriod: time.Minute,
		Resources: ResourceLimits{
			// 256 MiB: the LLM needs the RAM; libp2p's own autoscale takes
			// 1/8 of system memory (2 GiB on a 16 GiB desktop). At 256 MiB
			// the scaled limits are ~160 connections, ~2500 streams.
			MaxMemory: 256 << 20,
			// Half the process limit (libp2p's rule): the engine needs
			// descriptors for model files and the HTTP API.
			MaxFD: 0,
			// 0 = follow MaxMemory scaling.
			MaxConns:        0,
			MaxConnsInbound: 0,
			MaxStreams:      0,
		},
		// Enough for QUIC plus a TCP fallback across continents.
		DialTimeout: 15 * time.Second,
		// Below 4 peers a mesh partition is likely; ask the bootstrap peers.
		BootstrapMinPeers: 4,
		// 1 s .. 1 min: fast first join, gentle on a dead bootstrap peer.
		BootstrapRetryMin:      time.Second,
		BootstrapRetryMax:      time.Minute,
		BootstrapCheckInterval: 30 * time.Second,
		// kad-dht's own helper waits 2 min after a failed advertisement;
		// a peer that just joined should be findable within seconds.
		AdvertiseRetryMin: time.Second,
		AdvertiseRetryMax: 2 * time.Minute,
		// Re-announce hourly: provider records are kept 48 h by kad-dht,
		// but peers come and go; an hour bounds how long a departed peer
		// stays listed (dialing it just fails).
		AdvertiseTTL: time.Hour,
		// A minute: new peers also arrive by gossip and mDNS; the DHT
		// search is the slow path.
		DiscoveryInterval: time.Minute,
		RTT:               DefaultRTTConfig(),
		Metrics:           nil,
		Logger:            nil,
	}
}

// DefaultRTTConfig returns the round-trip estimator's defaults.
func DefaultRTTConfig() RTTConfig {
	return RTTConfig{
		// Every 10 s: RTT changes slowly; 3 small pings a peer per 10 s
		// cost nothing, even on a 100-peer mesh.
		PingInterval: 10 * time.Second,
		PingTimeout:  5 * time.Second,
		PingBurst:    3,
		// TCP's SRTT gain (RFC 6298).
		Alpha: 0.125,
		// 2 min: long enough to always hold a clean sample (12 rounds),
		// short enough to follow a route change.
		MinWindow: 2 * time.Minute,
		// A sample above 4x the base RTT is queueing or a stall, not the
		// path; capped, it still pulls the EWMA up if it persists.
		SpikeFactor: 4,
	}
}

// LoopbackConfig returns settings for many peers on one machine (tests,
// testnet): ephemeral ports on 127.0.0.1, TCP and QUIC, every peer a DHT
// server (there is no AutoNAT verdict on loopback), and none of the NAT
// machinery, mDNS or port mapping, which would reach past the machine.
// Timers are short so that meshes converge in seconds.
func LoopbackConfig() Config {
	c := DefaultConfig()
	c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	c.DHTMode = DHTServer
	c.EnableMDNS = false
	c.EnablePortMapping = false
	c.EnableAutoNAT = false
	c.EnableHolePunching = false
	c.EnableRelayClient = false
	c.DialTimeout = 5 * time.Second
	c.BootstrapRetryMin = 50 * time.Millisecond
	c.BootstrapRetryMax = 2 * time.Second
	c.BootstrapCheckInterval = 2 * time.Second
	c.AdvertiseRetryMin = 50 * time.Millisecond
	c.AdvertiseRetryMax = 2 * time.Second
	c.DiscoveryInterval = 2 * time.Second
	c.RTT.PingInterval = time.Second
	return c
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if len(c.ListenAddrs) == 0 {
		errs = append(errs, errors.New("p2p: no listen addresses"))
	}
	if _, err := ParseBootstrapPeers(c.BootstrapPeers); err != nil {
		errs = append(errs, err)
	}
	if c.ConnLowWater < 0 || c.ConnHighWater < c.ConnLowWater || c.ConnHighWater == 0 {
		errs = append(errs, fmt.Errorf("p2p: connection manager water marks %d/%d: want 0 <= low <= high, high > 0", c.ConnLowWater, c.ConnHighWater))
	}
	if c.Resources.MaxMemory <= 0 {
		errs = append(errs, errors.New("p2p: Resources.MaxMemory must be positive"))
	}
	if c.DHTMode < DHTAuto || c.DHTMode > DHTClient {
		errs = append(errs, fmt.Errorf("p2p: unknown %v", c.DHTMode))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"DialTimeout", c.DialTimeout},
		{"BootstrapRetryMin", c.BootstrapRetryMin},
		{"BootstrapRetryMax", c.BootstrapRetryMax},
		{"BootstrapCheckInterval", c.BootstrapCheckInterval},
		{"AdvertiseRetryMin", c.AdvertiseRetryMin},
		{"AdvertiseRetryMax", c.AdvertiseRetryMax},
		{"AdvertiseTTL", c.AdvertiseTTL},
		{"DiscoveryInterval", c.DiscoveryInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("p2p: %s must be positive", d.name))
		}
	}
	if c.BootstrapNode && (c.RelayLimitDuration <= 0 || c.RelayLimitData <= 0) {
		errs = append(errs, errors.New("p2p: a bootstrap node needs positive RelayLimitDuration and RelayLimitData"))
	}
	if err := c.RTT.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *RTTConfig) validate() error {
	if c.PingInterval < 0 || (c.PingInterval > 0 && (c.PingTimeout <= 0 || c.PingBurst < 1)) {
		return errors.New("p2p: RTT pinging needs PingTimeout > 0 and PingBurst >= 1")
	}
	if !(c.Alpha > 0 && c.Alpha <= 1) {
		return fmt.Errorf("p2p: RTT Alpha %v not in (0, 1]", c.Alpha)
	}
	if c.MinWindow <= 0 {
		return errors.New("p2p: RTT MinWindow must be positive")
	}
	if c.SpikeFactor != 0 && c.SpikeFactor < 1 {
		return fmt.Errorf("p2p: RTT SpikeFactor %v must be 0 or >= 1", c.SpikeFactor)
	}
	return nil
}
