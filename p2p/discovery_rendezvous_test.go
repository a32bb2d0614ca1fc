package p2p

import (
	"context"
	"testing"
	"time"
)

// TestDiscoverLoopIsTheOnlyWayClientsMeet: two DHT clients (DHTAuto
// peers behind NATs are clients) that know only the bootstrap node can
// meet only through JoinNamespace's discovery loop. The bootstrap node
// keeps clients out of its routing table, so no DHT lookup (the
// routing-table refresh after bootstrap, the lookup behind every
// advertisement) ever hands one client the other; only the provider
// records of the model's namespace do, and only the discovery loop
// dials what a lookup of them returns. A loop that does nothing fails
// this test at the deadline; the other discovery tests run every peer as
// a DHT server, where the DHT alone connects the mesh.
func TestDiscoverLoopIsTheOnlyWayClientsMeet(t *testing.T) {
	bcfg := testConfig(false)
	bcfg.BootstrapNode = true
	boot := newTestHost(t, bcfg)
	client := func() *Host {
		cfg := testConfig(false)
		cfg.DHTMode = DHTClient
		cfg.BootstrapPeers = bootstrapAddrs(boot)
		return newTestHost(t, cfg)
	}
	a, b, other := client(), client(), client()
	for _, p := range []*Host{a, b, other} {
		waitBootstrapped(t, p, 20*time.Second)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, otherNS := ModelNamespace("stories260K"), ModelNamespace("qwen-0.5b")
	for _, j := range []struct {
		h  *Host
		ns string
	}{{a, ns}, {b, ns}, {other, otherNS}} {
		if err := j.h.JoinNamespace(ctx, j.ns); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the two clients of one model to connect", func() bool {
		return connected(a, b.ID()) && connected(b, a.ID())
	})

	// The loop dialed the peers of its namespace only.
	for _, p := range []*Host{a, b} {
		if connected(p, other.ID()) {
			t.Errorf("%s connected to a peer of another model", p.ID().ShortString())
		}
	}
	// The premise: identify has long run (the clients exchanged their
	// advertisements through the node), and still no client is in the
	// node's routing table, so the DHT could not have introduced them.
	for _, p := range []*Host{a, b, other} {
		if boot.DHT().RoutingTable().Find(p.ID()) != "" {
			t.Fatalf("DHT client %s is in the bootstrap node's routing table: the DHT itself can introduce the clients and this test proves nothing about the discovery loop", p.ID().ShortString())
		}
	}
}
