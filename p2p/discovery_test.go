package p2p

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// startMesh starts a bootstrap node and n peers that bootstrap from it.
func startMesh(t *testing.T, n int) (*Host, []*Host) {
	t.Helper()
	bcfg := testConfig(false)
	bcfg.BootstrapNode = true
	boot := newTestHost(t, bcfg)
	peers := make([]*Host, n)
	for i := range peers {
		cfg := testConfig(false)
		cfg.BootstrapPeers = bootstrapAddrs(boot)
		peers[i] = newTestHost(t, cfg)
	}
	return boot, peers
}

func TestPeersJoinThroughBootstrapNode(t *testing.T) {
	boot, peers := startMesh(t, 3)
	for _, p := range peers {
		waitBootstrapped(t, p, 20*time.Second)
		if !connected(p, boot.ID()) {
			t.Fatalf("%s bootstrapped but is not connected to the bootstrap node", p.ID().ShortString())
		}
	}
	waitFor(t, 10*time.Second, "the bootstrap node to see every peer", func() bool {
		for _, p := range peers {
			if !connected(boot, p.ID()) {
				return false
			}
		}
		return true
	})
	// The peers entered the bootstrap node's DHT routing table, so it can
	// route lookups to them.
	waitFor(t, 10*time.Second, "peers in the bootstrap node's routing table", func() bool {
		return boot.DHT().RoutingTable().Size() == len(peers)
	})
}

// TestRendezvousFindsPeersOfAModel: peers that only know the bootstrap
// node find each other by the model's namespace, and peers of another
// model are not returned.
func TestRendezvousFindsPeersOfAModel(t *testing.T) {
	_, peers := startMesh(t, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nsA, nsB := ModelNamespace("stories260K"), ModelNamespace("qwen-0.5b")
	for _, p := range peers[:3] {
		waitBootstrapped(t, p, 20*time.Second)
		if err := p.Advertise(ctx, nsA); err != nil {
			t.Fatal(err)
		}
	}
	if err := peers[3].Advertise(ctx, nsB); err != nil {
		t.Fatal(err)
	}
	want := map[peer.ID]bool{peers[1].ID(): true, peers[2].ID(): true}
	waitFor(t, 20*time.Second, "peers[0] to find the other peers of its model", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		found, _ := peers[0].FindPeers(lctx, nsA)
		got := map[peer.ID]bool{}
		for _, pi := range found {
			if pi.ID == peers[0].ID() {
				t.Fatal("FindPeers returned self")
			}
			if pi.ID == peers[3].ID() {
				t.Fatal("FindPeers returned a peer of another model")
			}
			got[pi.ID] = true
		}
		return len(got) == len(want) && got[peers[1].ID()] && got[peers[2].ID()]
	})
}

// TestJoinNamespaceConnectsTheMesh: with JoinNamespace, peers that only
// dialed the bootstrap node end up connected to each other.
func TestJoinNamespaceConnectsTheMesh(t *testing.T) {
	_, peers := startMesh(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := ModelNamespace("m")
	for _, p := range peers {
		if err := p.JoinNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every peer connected to every other", func() bool {
		return fullyConnected(peers)
	})
}

func fullyConnected(peers []*Host) bool {
	for _, p := range peers {
		for _, q := range peers {
			if p != q && !connected(p, q.ID()) {
				return false
			}
		}
	}
	return true
}

// TestTwentyPeersFindEachOtherThroughOneBootstrapNode is the mesh
// test in process: 20 peers know only one bootstrap node and find all
// others through the DHT rendezvous.
func TestTwentyPeersFindEachOtherThroughOneBootstrapNode(t *testing.T) {
	if testing.Short() {
		t.Skip("20 hosts")
	}
	const n = 20
	start := time.Now()
	_, peers := startMesh(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := ModelNamespace("mmlu-model")
	for _, p := range peers {
		if err := p.JoinNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("%d peers fully connected", n), func() bool {
		return fullyConnected(peers)
	})
	t.Logf("%d peers fully connected through one bootstrap node in %v", n, time.Since(start).Round(time.Millisecond))
	// And the rendezvous itself lists everybody: any peer finds the 19
	// others under the model's namespace.
	waitFor(t, 30*time.Second, "a lookup to list all other peers", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		found, _ := peers[n-1].FindPeers(lctx, ns)
		got := map[peer.ID]bool{}
		for _, pi := range found {
			got[pi.ID] = true
		}
		for _, p := range peers[:n-1] {
			if !got[p.ID()] {
				return false
			}
		}
		return true
	})
	t.Logf("rendezvous lookup lists all %d other peers after %v", n-1, time.Since(start).Round(time.Millisecond))
}

// TestBootstrapRetriesUntilTheNodeComesUp: a peer started before its
// bootstrap node keeps retrying (with backoff) and joins once the node is
// up.
func TestBootstrapRetriesUntilTheNodeComesUp(t *testing.T) {
	bootKey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	bootID, _ := peer.IDFromPrivateKey(bootKey)
	// Pick a free port for the node that is not up yet.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)

	cfg := testConfig(false)
	cfg.BootstrapPeers = []string{addr + "/p2p/" + bootID.String()}
	p := newTestHost(t, cfg)
	select {
	case <-p.Bootstrapped():
		t.Fatal("bootstrapped with the node down")
	case <-time.After(300 * time.Millisecond):
	}

	bcfg := testConfig(false)
	bcfg.BootstrapNode = true
	bcfg.Identity = bootKey
	bcfg.ListenAddrs = []string{addr}
	boot := newTestHost(t, bcfg)
	waitBootstrapped(t, p, 20*time.Second)
	if !connected(p, boot.ID()) {
		t.Fatal("bootstrapped but not connected to the node")
	}
}

func TestDialBudgetStopsAtLowWater(t *testing.T) {
	cfg := testConfig(false)
	cfg.ConnLowWater, cfg.ConnHighWater = 3, 6
	h := newTestHost(t, cfg)
	var found []peer.AddrInfo
	for i := range 10 {
		found = append(found, peer.AddrInfo{ID: peer.ID(fmt.Sprint("p", i))})
	}
	if got := h.dialBudget(found); len(got) != 3 {
		t.Fatalf("budget with no connections: %d peers, want 3", len(got))
	}
	other := newTestHost(t, testConfig(false))
	infos, _ := ParseBootstrapPeers(bootstrapAddrs(other))
	if err := h.LibP2P().Connect(context.Background(), infos[0]); err != nil {
		t.Fatal(err)
	}
	got := h.dialBudget(append(found, infos[0]))
	if len(got) != 2 {
		t.Fatalf("budget with one connection: %d peers, want 2", len(got))
	}
	for _, pi := range got {
		if pi.ID == other.ID() {
			t.Fatal("budget includes a connected peer")
		}
	}
}
