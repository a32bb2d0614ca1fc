package p2p

import (
	"context"
	"io"

	"github.com/libp2p/go-libp2p"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
)

// TestNATTraversalPeerStarts: a peer with AutoNAT v2, hole punching and
// auto-relay on (port mapping and mDNS stay off: they would reach past the
// machine) and the DHT in auto mode starts and joins through a bootstrap
// node, which serves AutoNAT v2. (Hole punching itself needs two NATs; the
// DCUtR handler only appears once a peer has a public address.)
func TestNATTraversalPeerStarts(t *testing.T) {
	bcfg := testConfig(true)
	bcfg.BootstrapNode = true
	boot := newTestHost(t, bcfg)
	cfg := testConfig(true)
	cfg.EnableAutoNAT, cfg.EnableHolePunching, cfg.EnableRelayClient = true, true, true
	cfg.DHTMode = DHTAuto
	cfg.BootstrapPeers = bootstrapAddrs(boot)
	p := newTestHost(t, cfg)
	waitBootstrapped(t, p, 20*time.Second)
	waitFor(t, 10*time.Second, "AutoNAT v2 on the bootstrap node", func() bool {
		for _, id := range boot.LibP2P().Mux().Protocols() {
			if id == "/libp2p/autonat/2/dial-request" {
				return true
			}
		}
		return false
	})
	// A DHT client still uses the bootstrap node's routing.
	waitFor(t, 10*time.Second, "the bootstrap node in the routing table", func() bool {
		return p.DHT().RoutingTable().Find(boot.ID()) != ""
	})
}

// TestRelayThroughBootstrapNode: a peer that cannot be dialed directly
// reserves a slot on the bootstrap node; another peer reaches it through
// the relay and is told the connection is limited.
func TestRelayThroughBootstrapNode(t *testing.T) {
	bcfg := testConfig(false)
	bcfg.BootstrapNode = true
	bcfg.RelayLimitData = 64 << 10
	boot := newTestHost(t, bcfg)
	// The hidden peer listens on no socket, only for relayed connections:
	// only the relay can reach it.
	hidden, err := libp2p.New(libp2p.ListenAddrStrings("/p2p-circuit"), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hidden.Close() })
	dialer := newTestHost(t, testConfig(false))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	bootInfo := peer.AddrInfo{ID: boot.ID(), Addrs: boot.LibP2P().Addrs()}
	if err := hidden.Connect(ctx, bootInfo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the relay service", func() bool {
		_, err := client.Reserve(ctx, hidden, bootInfo)
		return err == nil
	})
	events, err := dialer.SubscribePeers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	relayed, err := ma.NewMultiaddr(boot.LibP2P().Addrs()[0].String() + "/p2p/" + boot.ID().String() + "/p2p-circuit")
	if err != nil {
		t.Fatal(err)
	}
	// Only the relayed address: the dialer must not learn a direct one.
	// Connect would otherwise upgrade to a direct connection at once.
	lctx := network.WithAllowLimitedConn(ctx, "test")
	if err := dialer.LibP2P().Connect(lctx, peer.AddrInfo{ID: hidden.ID(), Addrs: []ma.Multiaddr{relayed}}); err != nil {
		t.Fatal(err)
	}
	if c := dialer.LibP2P().Network().Connectedness(hidden.ID()); c != network.Limited {
		t.Fatalf("connectedness through the relay %v, want Limited", c)
	}
	for {
		select {
		case ev := <-events:
			if ev.Peer == hidden.ID() {
				if !ev.Connected || !ev.Limited {
					t.Fatalf("relayed peer event %+v, want connected and limited", ev)
				}
				checkRelayDataLimit(t, lctx, dialer, hidden, bcfg.RelayLimitData)
				return
			}
		case <-ctx.Done():
			t.Fatal("no event for the relayed peer")
		}
	}
}

// checkRelayDataLimit sends a quarter of the relay's data limit through
// it, which must arrive whole, then 4x the limit, which the relay must cut:
// a volunteer relay is not a bulk proxy.
func checkRelayDataLimit(t *testing.T, ctx context.Context, dialer *Host, hidden host.Host, limit int64) {
	t.Helper()
	type result struct {
		n   int64
		err error
	}
	got := make(chan result, 2)
	hidden.SetStreamHandler("/meshllm/test/sink", func(s network.Stream) {
		n, err := io.Copy(io.Discard, s)
		got <- result{n, err}
		s.Reset()
	})
	send := func(size int64) {
		s, err := dialer.LibP2P().NewStream(ctx, hidden.ID(), "/meshllm/test/sink")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		s.SetWriteDeadline(time.Now().Add(10 * time.Second))
		s.Write(make([]byte, size)) // fails once the relay resets the circuit
		s.CloseWrite()
	}
	send(limit / 4)
	select {
	case r := <-got:
		if r.err != nil || r.n != limit/4 {
			t.Fatalf("under the limit: received %d of %d bytes, err %v", r.n, limit/4, r.err)
		}
	case <-ctx.Done():
		t.Fatal("receiver never finished")
	}
	send(4 * limit)
	// The relay closes the circuit; the receiver may not even have seen
	// the stream open.
	waitFor(t, 10*time.Second, "the relay to cut the circuit", func() bool {
		return dialer.LibP2P().Network().Connectedness(hidden.ID()) == network.NotConnected
	})
	select {
	case r := <-got:
		if r.n >= 4*limit {
			t.Fatalf("relay passed %d bytes with a %d-byte limit", r.n, limit)
		}
	default:
	}
}
