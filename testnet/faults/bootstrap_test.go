package faults

import (
	"testing"
	"time"
)

// TestBootstrapPeerDown: the bootstrap peer every other peer joined
// through dies after the mesh formed. The others keep gossiping and
// routing to each other, the client's requests keep succeeding, and a new
// peer can still join through a surviving one.
func TestBootstrapPeerDown(t *testing.T) {
	needBinary(t)
	astro := subject(t, "astronomy")
	// H holds the prefix; A and C know H only through the bootstrap
	// peer's DHT.
	h := startPeer(t, "h")
	warm(t, h, astro)
	boot := startPeer(t, "boot", "--bootstrap-node", "--bootstrap", h.Addr())
	a := startPeer(t, "a", "--bootstrap", boot.Addr())
	c := startPeer(t, "c", "--bootstrap", boot.Addr())
	waitFor(t, "A to know H's digest and C", 60*time.Second, func() bool {
		return a.Knows(t.Context(), h.ID(), true) && a.Knows(t.Context(), c.ID(), false)
	})

	d := &Driver{Workers: 1, Target: to(a), Ask: fiveShots(astro, 8), Pause: 100 * time.Millisecond}
	stop := runDriver(t, d)
	forwarded := func() float64 {
		m, err := a.Metrics(t.Context())
		if err != nil {
			return -1
		}
		return m.Sum(`meshllm_router_served_total{where="peer"}`)
	}
	waitFor(t, "a request forwarded to H", 30*time.Second, func() bool { return forwarded() >= 1 })

	killedAt := time.Now()
	if err := boot.Kill(); err != nil {
		t.Fatal(err)
	}
	dropped := watch(t, func() bool { return !a.Sees(t.Context(), boot.ID()) })
	before := forwarded()
	waitFor(t, "A to forward to H after the bootstrap peer died", 30*time.Second, func() bool { return forwarded() > before })
	forwardAgain := time.Now()
	droppedAt := await(t, "A to drop the bootstrap peer", dropped, 30*time.Second)

	// Gossip still flows between the survivors: H's load stays fresh at A
	// for a few announcement periods after the bootstrap peer died.
	freshUntil := time.Now().Add(3 * time.Second)
	for time.Now().Before(freshUntil) {
		st, ok := peerStatus(t.Context(), a, h.ID())
		if !ok || st.Load == nil || *st.LoadAgeMillis > 5000 {
			t.Fatalf("A lost H's announcements after the bootstrap peer died: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A newcomer joins through a survivor and is seen by everyone.
	n := startPeer(t, "n", "--bootstrap", a.Addr())
	joinedAt := time.Now()
	waitFor(t, "H and C to see the newcomer", 60*time.Second, func() bool {
		return h.Knows(t.Context(), n.ID(), false) && c.Knows(t.Context(), n.ID(), false)
	})
	seen := time.Now()
	s := checkNoFailures(t, stop())
	t.Logf("FIGURE bootstrap: A forwarded to H again %s after the bootstrap peer was killed, dropped it from its view after %s; "+
		"a newcomer joining through A was seen by H and C after %s; client through A: %s",
		ms(forwardAgain.Sub(killedAt)), ms(droppedAt.Sub(killedAt)), ms(seen.Sub(joinedAt)), s)
}
