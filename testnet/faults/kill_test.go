package faults

import (
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/mmlu"
)

// TestServingPeerKilledMidStream: H streams a reply forwarded by A and is
// SIGKILLed at the first piece. A finishes that reply itself (local
// continuation), and a steady client stream through A sees no failure.
func TestServingPeerKilledMidStream(t *testing.T) {
	needBinary(t)
	geo, astro := subject(t, "high_school_geography"), subject(t, "astronomy")
	h, a, _ := holderMesh(t, geo, astro)

	// The steady stream is short story prompts that A serves itself: H
	// stays idle, so A's choice of H for the 5-shot stream does not hang
	// on H's queue at the moment of the decision. (The stall, restart and
	// bootstrap cases drive traffic that H serves.)
	d := &Driver{Workers: 1, Target: to(a), Ask: stories(16), Pause: 100 * time.Millisecond}
	stop := runDriver(t, d)
	if _, err := d.WaitResult(t.Context(), 30*time.Second, func(r Result) bool { return r.Err == nil }); err != nil {
		t.Fatal(err)
	}

	// The stream is cut only when H serves it: A's router may judge H
	// slower than itself at that moment (the speeds are measured, and
	// noisy on shared cores) and serve locally; then the next subject H
	// holds is tried.
	const streamTokens = 300 // long enough that H is still generating when it dies
	var killedAt time.Time
	var dropped <-chan time.Time
	var ans Answer
	var rec node.DecisionRecord
	for i, s := range []*mmlu.Subject{geo, astro} {
		var once sync.Once
		ask := Ask{Prompt: s.FiveShot(500), MaxTokens: streamTokens, Stream: true, OnFirstPiece: func() {
			once.Do(func() {
				if st, err := h.Mesh(t.Context(), false); err != nil || st.Local.Active == 0 {
					return // A did not forward the stream to H
				}
				killedAt = time.Now()
				if err := h.Kill(); err != nil {
					t.Error(err)
				}
				dropped = watch(t, func() bool { return !a.Sees(t.Context(), h.ID()) })
			})
		}}
		sent := time.Now()
		var err error
		if ans, err = Complete(t.Context(), httpClient(), a.HTTP(), ask); err != nil {
			t.Fatalf("stream through A: %v", err)
		}
		rec, _ = decisionFor(t, a, sent, streamTokens)
		if !killedAt.IsZero() {
			break
		}
		t.Logf("try %d: A did not forward the stream to H: %s (local %.0f ms, peer %.0f ms)", i+1, rec.Reason, rec.LocalCostMillis, rec.PeerCostMillis)
	}
	if killedAt.IsZero() {
		t.Fatal("A forwarded none of the streams to H")
	}
	finished := time.Now()
	if string(rec.Chosen) != h.ID() || !rec.Continued || len(rec.Attempts) == 0 || rec.Attempts[0].Pieces == 0 {
		t.Fatalf("the stream was not forwarded to H and continued locally after H broke off: %+v", rec)
	}
	droppedAt := await(t, "A to drop H from its view", dropped, 30*time.Second)
	// More requests after the fault, all served.
	if _, err := d.WaitResult(t.Context(), 60*time.Second, func(r Result) bool { return r.Start.After(droppedAt) }); err != nil {
		t.Fatal(err)
	}
	s := checkNoFailures(t, stop())
	t.Logf("FIGURE kill: stream of %d tokens (%s) broke off after %d piece(s) from H; longest gap between pieces %s; finished by A %s after the kill; "+
		"A dropped H from its view %s after the kill; client through A: %s",
		ans.CompletionTokens, ans.FinishReason, rec.Attempts[0].Pieces, ms(ans.MaxGap), ms(finished.Sub(killedAt)), ms(droppedAt.Sub(killedAt)), s)
}
