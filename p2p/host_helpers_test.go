package p2p

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// waitFor polls cond until it holds or the deadline passes. Network
// convergence has no single event to wait on; the deadline is generous
// and never a claim about speed.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testConfig is LoopbackConfig, TCP only unless quic is asked for (half
// the sockets and goroutines for big meshes), pinging off unless a test
// turns it on.
func testConfig(quic bool) Config {
	c := LoopbackConfig()
	if !quic {
		c.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	}
	c.RTT.PingInterval = 0
	return c
}

// newTestHost starts a host and closes it at the end of the test.
func newTestHost(t testing.TB, cfg Config) *Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close %s: %v", h.ID().ShortString(), err)
		}
	})
	return h
}

// bootstrapAddrs returns h's multiaddrs as strings for BootstrapPeers.
func bootstrapAddrs(h *Host) []string {
	var out []string
	for _, a := range h.Addrs() {
		out = append(out, a.String())
	}
	return out
}

// waitBootstrapped waits for h to reach a bootstrap peer.
func waitBootstrapped(t testing.TB, h *Host, timeout time.Duration) {
	t.Helper()
	select {
	case <-h.Bootstrapped():
	case <-time.After(timeout):
		t.Fatalf("%s did not reach its bootstrap peers within %v", h.ID().ShortString(), timeout)
	}
}

func connected(h *Host, p peer.ID) bool {
	for _, q := range h.Peers() {
		if q == p {
			return true
		}
	}
	return false
}
