package p2p

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// mkPeerID returns a deterministic Ed25519 peer ID for seed.
func mkPeerID(t testing.TB, seed byte) peer.ID {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	priv, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(s))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// mockHosts returns n mocknet hosts, linked and connected in a full mesh,
// closed at the end of the test.
func mockHosts(t testing.TB, n int) []host.Host {
	t.Helper()
	mn, err := mocknet.FullMeshConnected(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mn.Close() })
	return mn.Hosts()
}

// pollUntil waits for cond, checking every few milliseconds, and fails the
// test after timeout (a generous bound for network convergence, never an
// assertion about speed).
func pollUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// tcpHosts returns n real libp2p hosts on 127.0.0.1 (TCP, Noise or TLS,
// yamux), connected in a full mesh and closed at the end of the test.
func tcpHosts(t testing.TB, n int) []host.Host {
	t.Helper()
	hs := make([]host.Host, n)
	for i := range hs {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay(),
			libp2p.NoTransports, libp2p.Transport(tcp.NewTCPTransport))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		hs[i] = h
	}
	for i := range hs {
		for j := i + 1; j < n; j++ {
			if err := hs[i].Connect(context.Background(), peer.AddrInfo{ID: hs[j].ID(), Addrs: hs[j].Addrs()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return hs
}

func mocknetFull(n int) (mocknet.Mocknet, error) { return mocknet.FullMeshConnected(n) }
