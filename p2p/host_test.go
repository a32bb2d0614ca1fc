package p2p

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

func TestHostAddrsAreDialableP2PAddrs(t *testing.T) {
	h := newTestHost(t, testConfig(true))
	addrs := h.Addrs()
	var tcp, quic bool
	for _, a := range addrs {
		id, err := a.ValueForProtocol(ma.P_P2P)
		if err != nil || id != h.ID().String() {
			t.Errorf("%s does not end in /p2p/%s", a, h.ID())
		}
		if ip, _ := a.ValueForProtocol(ma.P_IP4); ip != "127.0.0.1" {
			t.Errorf("%s is not on loopback", a)
		}
		_, errT := a.ValueForProtocol(ma.P_TCP)
		_, errQ := a.ValueForProtocol(ma.P_QUIC_V1)
		tcp = tcp || errT == nil
		quic = quic || errQ == nil
	}
	if !tcp || !quic {
		t.Fatalf("want TCP and QUIC addresses, got %v", addrs)
	}
	infos, err := ParseBootstrapPeers(bootstrapAddrs(h))
	if err != nil || len(infos) != 1 || infos[0].ID != h.ID() {
		t.Fatalf("printed addresses do not parse back to one peer: %v %v", infos, err)
	}
}

func TestHostIdentitySurvivesRestart(t *testing.T) {
	cfg := testConfig(false)
	cfg.DataDir = t.TempDir()
	ctx := context.Background()
	h1, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := h1.ID()
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	h2 := newTestHost(t, cfg)
	if h2.ID() != id {
		t.Fatalf("PeerID changed across restarts: %s -> %s", id, h2.ID())
	}
}

func TestHostClosedRefusesWork(t *testing.T) {
	h, err := New(context.Background(), testConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := h.Advertise(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Advertise after Close: %v", err)
	}
	if _, err := h.SubscribePeers(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("SubscribePeers after Close: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"no listen":        func(c *Config) { c.ListenAddrs = nil },
		"bootstrap no id":  func(c *Config) { c.BootstrapPeers = []string{"/ip4/127.0.0.1/tcp/4002"} },
		"bootstrap junk":   func(c *Config) { c.BootstrapPeers = []string{"example.org:4002"} },
		"water marks":      func(c *Config) { c.ConnLowWater, c.ConnHighWater = 10, 5 },
		"no memory":        func(c *Config) { c.Resources.MaxMemory = 0 },
		"alpha":            func(c *Config) { c.RTT.Alpha = 0 },
		"spike factor":     func(c *Config) { c.RTT.SpikeFactor = 0.5 },
		"dht mode":         func(c *Config) { c.DHTMode = 7 },
		"relay limits":     func(c *Config) { c.BootstrapNode, c.RelayLimitData = true, 0 },
		"discovery period": func(c *Config) { c.DiscoveryInterval = 0 },
		"ping timeout":     func(c *Config) { c.RTT.PingInterval, c.RTT.PingTimeout = time.Second, 0 },
	} {
		cfg := testConfig(false)
		mod(&cfg)
		if _, err := New(context.Background(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, c := range []Config{DefaultConfig(), LoopbackConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("preset invalid: %v", err)
		}
	}
}

func TestDHTModeRoundTrip(t *testing.T) {
	for _, m := range []DHTMode{DHTAuto, DHTServer, DHTClient} {
		got, err := ParseDHTMode(m.String())
		if err != nil || got != m {
			t.Errorf("%v: %v %v", m, got, err)
		}
	}
	if _, err := ParseDHTMode("both"); err == nil {
		t.Error("unknown mode accepted")
	}
}

// TestBootstrapNodeOffersServices checks that a bootstrap node answers the
// DHT under the project prefix (not the public IPFS one), AutoNAT and
// circuit-relay v2, and that an ordinary peer offers no relay.
func TestBootstrapNodeOffersServices(t *testing.T) {
	bcfg := testConfig(false)
	bcfg.BootstrapNode = true
	b := newTestHost(t, bcfg)
	p := newTestHost(t, testConfig(false))
	has := func(h *Host, id protocol.ID) bool {
		for _, q := range h.LibP2P().Mux().Protocols() {
			if q == id {
				return true
			}
		}
		return false
	}
	const relayHop = "/libp2p/circuit/relay/0.2.0/hop"
	waitFor(t, 10*time.Second, "relay service on the bootstrap node", func() bool { return has(b, relayHop) })
	for _, id := range []protocol.ID{"/meshllm/kad/1.0.0", "/libp2p/autonat/1.0.0"} {
		if !has(b, id) {
			t.Errorf("bootstrap node lacks %s", id)
		}
	}
	for _, h := range []*Host{b, p} {
		for _, id := range h.LibP2P().Mux().Protocols() {
			if strings.HasPrefix(string(id), "/ipfs/kad") {
				t.Errorf("%s speaks the public DHT protocol %s", h.ID().ShortString(), id)
			}
		}
	}
	if has(p, relayHop) {
		t.Error("an ordinary peer offers relay service")
	}
}

func TestPeerEventsReportConnectAndDisconnect(t *testing.T) {
	a := newTestHost(t, testConfig(false))
	b := newTestHost(t, testConfig(false))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := a.SubscribePeers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := ParseBootstrapPeers(bootstrapAddrs(b))
	if err := a.LibP2P().Connect(ctx, infos[0]); err != nil {
		t.Fatal(err)
	}
	next := func(want bool) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Peer == b.ID() && ev.Connected == want {
					if ev.Limited {
						t.Errorf("direct loopback connection reported as limited")
					}
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no event Connected=%v for %s", want, b.ID().ShortString())
			}
		}
	}
	next(true)
	if err := a.LibP2P().Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	next(false)

	// A late subscriber learns of peers already connected.
	if err := a.LibP2P().Connect(ctx, infos[0]); err != nil {
		t.Fatal(err)
	}
	late, err := a.SubscribePeers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-late:
		if ev.Peer != b.ID() || !ev.Connected {
			t.Fatalf("first event of a late subscriber: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("late subscriber got no snapshot")
	}
	cancel()
	for range late {
		// Drains until closed when ctx ends.
	}
}

func TestHostPingsPeersAndForgetsOnDisconnect(t *testing.T) {
	cfg := testConfig(false)
	cfg.RTT.PingInterval = 50 * time.Millisecond
	a := newTestHost(t, cfg)
	b := newTestHost(t, testConfig(false))
	infos, _ := ParseBootstrapPeers(bootstrapAddrs(b))
	if err := a.LibP2P().Connect(context.Background(), infos[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "an RTT estimate", func() bool {
		_, ok := a.RTT(b.ID())
		return ok
	})
	d, _ := a.RTT(b.ID())
	st, _ := a.RTTStats(b.ID())
	t.Logf("loopback RTT estimate %v (min %v, %d samples)", d, st.Min, st.Samples)
	if d <= 0 || d > time.Second {
		t.Fatalf("loopback RTT estimate %v", d)
	}
	a.ObserveRTT(b.ID(), d)
	if err := a.LibP2P().Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the estimate to be dropped", func() bool {
		_, ok := a.RTT(b.ID())
		return !ok && a.LibP2P().Network().Connectedness(b.ID()) != network.Connected
	})
}

// TestMetricsGoToTheGivenRegistry: libp2p's metrics land in the registry
// of Config.Metrics, and two hosts can share one registry.
func TestMetricsGoToTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		cfg := testConfig(false)
		cfg.Metrics = reg
		newTestHost(t, cfg)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "libp2p_") {
		t.Fatalf("no libp2p metrics registered: %v", names)
	}
}
