package faults

import (
	"testing"
	"time"
)

// TestPeerRestartsWithSameIdentity: H crashes and comes back with the same
// data dir (same peer ID), a new epoch and an empty cache. A stops
// expecting H's old prefixes: no decision after H's return overestimates
// what H holds, and no client request fails.
func TestPeerRestartsWithSameIdentity(t *testing.T) {
	needBinary(t)
	geo, astro := subject(t, "high_school_geography"), subject(t, "astronomy")
	h, a, _ := holderMesh(t, geo, astro)
	oldID := h.ID()

	d := &Driver{Workers: 1, Target: to(a), Ask: fiveShots(astro, 8), Pause: 100 * time.Millisecond}
	stop := runDriver(t, d)
	if _, err := d.WaitResult(t.Context(), 30*time.Second, func(r Result) bool { return r.Err == nil && r.Answer.CachedTokens > 500 }); err != nil {
		t.Fatalf("no request through A reused H's cache: %v", err)
	}

	killedAt := time.Now()
	dropped := watch(t, func() bool { return !a.Sees(t.Context(), oldID) })
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := h.Restart(t.Context(), "--bootstrap", a.Addr()); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	if h.ID() != oldID {
		t.Fatalf("restarted with the same data dir, H is %s, was %s", h.ID(), oldID)
	}
	waitFor(t, "A to know the restarted H", 60*time.Second, func() bool { return a.Knows(t.Context(), h.ID(), false) })
	knownAt := time.Now()
	var droppedAt time.Time
	select {
	case droppedAt = <-dropped:
	default: // A never lost sight of H: the new epoch alone must reset its replica
	}

	// Geography: only the old H held it and A never served it. A must not
	// expect the new H to hold it.
	const probeTokens = 9
	if _, err := Complete(t.Context(), httpClient(), a.HTTP(), Ask{Prompt: geo.FiveShot(7), MaxTokens: probeTokens}); err != nil {
		t.Fatal(err)
	}
	probe, ok := decisionFor(t, a, knownAt, probeTokens)
	if !ok {
		t.Fatal("no decision recorded for the probe")
	}
	s := checkNoFailures(t, stop())
	over := 0
	for _, r := range recentSince(t, a, knownAt) {
		if string(r.Chosen) == h.ID() && r.EstimatedCached > r.RealizedCached+64 {
			over++
			t.Errorf("A expected the restarted H to reuse %d tokens, it reused %d: %+v", r.EstimatedCached, r.RealizedCached, r)
		}
	}
	if probe.EstimatedCached > probe.RealizedCached+64 {
		t.Errorf("probe of the old prefix: estimated %d cached, realized %d: %+v", probe.EstimatedCached, probe.RealizedCached, probe)
	}
	view := "A kept H in its view throughout (epoch change only)"
	if !droppedAt.IsZero() {
		view = "A dropped the old H " + ms(droppedAt.Sub(killedAt)) + " after the crash"
	}
	t.Logf("FIGURE restart: H back %s after the crash with the same ID; %s; A knew the new H %s after it was up; "+
		"old-prefix probe: %s, estimated %d cached, realized %d; overestimates after the return: %d; client through A: %s",
		ms(upAt.Sub(killedAt)), view, ms(knownAt.Sub(upAt)), probe.Reason, probe.EstimatedCached, probe.RealizedCached, over, s)
}
