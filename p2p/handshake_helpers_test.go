package p2p

import (
	"context"
	"crypto/rand"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// handshakeTimeout is the pending window of the mocknet handshake tests
// (virtual time: they run in synctest bubbles).
const handshakeTimeout = 10 * time.Second

// mockPeers returns n unconnected peers of a mocknet whose links are all
// up; it closes with the test. Call it inside a synctest bubble.
func mockPeers(t *testing.T, n int) (mocknet.Mocknet, []host.Host) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	hs := make([]host.Host, n)
	for i := range hs {
		h, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	return mn, hs
}

// joinMesh starts a Membership with key on h (closed with the test).
func joinMesh(t *testing.T, h host.Host, key []byte) *Membership {
	t.Helper()
	m, err := NewMembership(h, MembershipConfig{Key: key, HandshakeTimeout: handshakeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// connectPeers connects a to b (a dials).
func connectPeers(t *testing.T, mn mocknet.Mocknet, a, b host.Host) {
	t.Helper()
	if _, err := mn.ConnectPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
}

// isConnected reports whether a has a connection to b.
func isConnected(a, b host.Host) bool {
	return a.Network().Connectedness(b.ID()) == network.Connected
}

// memberStream opens a stream of proto from h to p, as an attacker without a
// Membership would.
func memberStream(t *testing.T, h host.Host, p peer.ID, proto protocol.ID) network.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := h.NewStream(ctx, p, proto)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// readRest reads st until the other side ends it and returns what came.
func readRest(st network.Stream) []byte {
	b, _ := io.ReadAll(st)
	return b
}
