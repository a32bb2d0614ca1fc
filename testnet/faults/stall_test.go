package faults

import (
	"testing"
	"time"
)

// TestStalledPeer: H holds the prefix A's client wants and is frozen with
// SIGSTOP (its kernel still accepts connections; it never answers). A's
// watchdog gives up on it and the request completes elsewhere; no client
// request fails. After SIGCONT, H rejoins: A hears it again and it serves.
func TestStalledPeer(t *testing.T) {
	needBinary(t)
	geo, astro := subject(t, "high_school_geography"), subject(t, "astronomy")
	h, a, _ := holderMesh(t, geo, astro)

	d := &Driver{Workers: 1, Target: to(a), Ask: fiveShots(astro, 8), Pause: 200 * time.Millisecond}
	stop := runDriver(t, d)
	if _, err := d.WaitResult(t.Context(), 30*time.Second, func(r Result) bool { return r.Err == nil && r.Answer.CachedTokens > 500 }); err != nil {
		t.Fatalf("no request through A reused H's cache: %v", err)
	}
	before := Summarize(d.Results())

	stoppedAt := time.Now()
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	// The first request sent after the stall began must complete, slowly.
	hit, err := d.WaitResult(t.Context(), 60*time.Second, func(r Result) bool { return r.Start.After(stoppedAt) })
	if err != nil {
		t.Fatal(err)
	}
	var timedOut bool
	for _, r := range recentSince(t, a, stoppedAt) {
		for _, at := range r.Attempts {
			timedOut = timedOut || (string(at.Peer) == h.ID() && at.Outcome == "timeout")
		}
	}
	if !timedOut {
		t.Fatalf("no forward to the stalled H timed out; A's decisions: %+v", recentSince(t, a, stoppedAt))
	}
	// The next requests no longer wait for H.
	after, err := d.WaitResult(t.Context(), 60*time.Second, func(r Result) bool { return r.Start.After(hit.End()) })
	if err != nil {
		t.Fatal(err)
	}

	contAt := time.Now()
	if err := h.Cont(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to know H again: idle, fresh, out of cooldown", 60*time.Second, func() bool {
		st, ok := peerStatus(t.Context(), a, h.ID())
		return ok && st.Load != nil && st.Load.QueueDepth == 0 && st.Load.Active == 0 &&
			*st.LoadAgeMillis < 2000 && st.DigestBlocks > 0 && st.CooldownUntil == nil
	})
	rejoined := time.Now()
	s := checkNoFailures(t, stop())

	// H serves again: a request sent to it directly completes.
	if _, err := Complete(t.Context(), httpClient(), h.HTTP(), Ask{Prompt: astro.FiveShot(3), MaxTokens: 8}); err != nil {
		t.Fatalf("H after SIGCONT: %v", err)
	}
	// The timeout counted against H: A trusts its claims less now (they
	// recover with honest results), which is the price of a stall.
	st, _ := peerStatus(t.Context(), a, h.ID())
	trust := 1.0
	if st.Trust != nil {
		trust = *st.Trust
	}
	t.Logf("FIGURE stall: request hitting the frozen H took %s (client p50 before %s: %s extra); the next one %s; "+
		"H frozen for %s; A knew H again (fresh load, out of cooldown) %s after SIGCONT, trust in H %.2f; client through A: %s",
		ms(hit.Answer.Latency), ms(before.P50), ms(hit.Answer.Latency-before.P50), ms(after.Answer.Latency),
		ms(contAt.Sub(stoppedAt)), ms(rejoined.Sub(contAt)), trust, s)
}
