package faults

import (
	"sync"
	"testing"
	"time"
)

// TestServingPeerKilledMidStream: B streams a forwarded reply and is
// SIGKILLed after the first piece. A finishes that reply itself, and a
// steady client stream through A sees no failure.
func TestServingPeerKilledMidStream(t *testing.T) {
	needBinary(t)
	_, a, b := threePeers(t)
	geo := subject(t, "high_school_geography")
	warm(t, b, geo)
	waitFor(t, "B's digest to reach A", 30*time.Second, func() bool { return a.Knows(t.Context(), b.ID(), true) })

	d := &Driver{Workers: 1, Target: to(a), Ask: fiveShots(geo, 8)}
	stop := runDriver(t, d)

	var once sync.Once
	var killedAt time.Time
	ask := Ask{Prompt: geo.FiveShot(500), MaxTokens: 200, Stream: true, OnFirstPiece: func() {
		once.Do(func() {
			killedAt = time.Now()
			if err := b.Kill(); err != nil {
				t.Error(err)
			}
		})
	}}
	ans, err := Complete(t.Context(), httpClient(), a.HTTP(), ask)
	if err != nil {
		t.Fatalf("stream through A after B died: %v", err)
	}
	if killedAt.IsZero() {
		t.Fatal("the stream had no piece to kill B at")
	}
	finished := time.Now()
	waitFor(t, "A to drop B from its view", 30*time.Second, func() bool { return !a.Sees(t.Context(), b.ID()) })
	dropped := time.Now()
	// A few more requests after the fault, all served.
	n := len(d.Results())
	if _, err := d.WaitResult(t.Context(), 60*time.Second, func(r Result) bool { return r.Start.After(dropped) }); err != nil {
		t.Fatal(err)
	}
	s := checkNoFailures(t, stop())

	m, err := a.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum(`meshllm_router_served_total{where="continued"}`); got < 1 {
		t.Fatalf("A continued %v replies locally; B died mid-stream", got)
	}
	t.Logf("stream of %d tokens (%s) finished %s after B was killed at its first piece; A dropped B from its view after %s",
		ans.CompletionTokens, ans.FinishReason, ms(finished.Sub(killedAt)), ms(dropped.Sub(killedAt)))
	t.Logf("client through A: %s (%d before the view dropped B)", s, n)
}
