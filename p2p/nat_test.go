package p2p

import (
	"context"
	"testing"
	"time"

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
	boot := newTestHost(t, bcfg)
	hidden := newTestHost(t, testConfig(false))
	dialer := newTestHost(t, testConfig(false))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	bootInfo := peer.AddrInfo{ID: boot.ID(), Addrs: boot.LibP2P().Addrs()}
	if err := hidden.LibP2P().Connect(ctx, bootInfo); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the relay service", func() bool {
		_, err := client.Reserve(ctx, hidden.LibP2P(), bootInfo)
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
	// The first event for the hidden peer is the relayed connection. (A
	// direct one may follow: the DHT dials the addresses identify
	// reports, which on loopback work.)
	for {
		select {
		case ev := <-events:
			if ev.Peer == hidden.ID() {
				if !ev.Connected || !ev.Limited {
					t.Fatalf("relayed peer event %+v, want connected and limited", ev)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("no event for the relayed peer")
		}
	}
}
