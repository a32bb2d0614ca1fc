package node

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/prometheus/client_golang/prometheus"
)

// truthScorer is a fake infer.Scorer that knows the one reply its model
// gives: a token equal to the truth's at its position scores rank 0, any
// other rank 100 at -12 nats.
type truthScorer struct {
	mu    sync.Mutex
	truth []int32
	calls int
}

func (f *truthScorer) Score(_ context.Context, prompt, reply []int32) ([]infer.TokenScore, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	out := make([]infer.TokenScore, len(reply))
	for i, tok := range reply {
		out[i] = infer.TokenScore{Token: tok, Rank: 100, Logprob: -12, TopLogprob: -0.1, Above: 0.99}
		if i < len(f.truth) && f.truth[i] == tok {
			out[i] = infer.TokenScore{Token: tok, Logprob: -0.1, TopLogprob: -0.1}
		}
	}
	return out, nil
}

// newVerifyingPeer is newTestPeer with a scorer and a verify fraction.
func newVerifyingPeer(t *testing.T, id PeerID, fwd Forwarder, s infer.Scorer, fraction float64) *testPeer {
	t.Helper()
	eng := newSimEngine(t)
	pol := DefaultPolicy()
	pol.VerifyFraction = fraction
	mesh, err := NewMesh(MeshConfig{Self: id, Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := NewRouter(RouterConfig{Engine: eng, Mesh: mesh, Forwarder: fwd, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), Recent: 8, Scorer: s,
		VerifyRand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return &testPeer{id: id, eng: eng, router: r, reg: reg}
}

// garbage forwards to b but replaces the text of every piece: a peer that
// is fast and honest about its cache, and returns text its model did not
// produce.
func garbage(b *testPeer) Forwarder {
	return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
		return b.router.ServeForwarded(ctx, req, func(p infer.Piece) error {
			if p.Text != "" {
				p.Text = " zq"
			}
			return emit(p)
		})
	})
}

func TestVerifyCatchesGarbageForwarder(t *testing.T) {
	for _, c := range []struct {
		name     string
		fraction float64
		fwd      func(*testPeer) Forwarder
		lies     int64
	}{
		{"honest peer keeps its trust", 1, toPeer, 0},
		{"garbage caught at fraction 1", 1, garbage, 1},
		// Without checks the liar's reply is never noticed: its claims
		// (cache, time) hold, so it keeps full trust and keeps being chosen.
		{"garbage unnoticed at fraction 0", 0, garbage, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newTestPeer(t, "B", nil)
				req := infer.Request{Prompt: prompt(7, 600), Sampling: infer.Sampling{MaxTokens: 8}}
				var honest collect
				if _, err := b.router.Generate(t.Context(), req, honest.emit); err != nil {
					t.Fatal(err)
				}
				scorer := &truthScorer{}
				a := newVerifyingPeer(t, "A", c.fwd(b), scorer, c.fraction)
				truth, _, err := a.router.replyTokens(honest.text())
				if err != nil {
					t.Fatal(err)
				}
				scorer.truth = truth
				advertise(t, a, "B", b.eng.Info().ID, req.Prompt)

				var got collect
				if _, err := a.router.Generate(t.Context(), req, got.emit); err != nil {
					t.Fatal(err)
				}
				if rec := a.router.Recent()[0]; rec.ServedBy != "B" {
					t.Fatalf("first request served by %q", rec.ServedBy)
				}
				synctest.Wait() // the background check
				st := a.router.Verified()
				wantChecked := int64(0)
				if c.fraction > 0 {
					wantChecked = 1
				}
				if st.Checked != wantChecked || st.Lies != c.lies || st.Skipped != 0 {
					t.Fatalf("verify stats %+v", st)
				}
				trust := a.router.Trust().Get("B", time.Now())
				if c.lies > 0 && trust != 0 || c.lies == 0 && trust < 1 {
					t.Fatalf("B's trust %v after %d lies", trust, c.lies)
				}
				// The next request: a caught liar is no longer chosen.
				advertise(t, a, "B", b.eng.Info().ID, req.Prompt)
				if _, err := a.router.Generate(t.Context(), req, got.emit); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				served := a.router.Recent()[1].ServedBy
				if c.lies > 0 && served != "" || c.lies == 0 && served != "B" {
					t.Fatalf("second request served by %q after %d lies", served, c.lies)
				}
			})
		})
	}
}

func TestVerifySkipsWhenDrawnOutOrBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestPeer(t, "B", nil)
		scorer := &truthScorer{}
		a := newVerifyingPeer(t, "A", toPeer(b), scorer, 0.4) // the fake draw is 0.5: never checked
		req := infer.Request{Prompt: prompt(7, 600), Sampling: infer.Sampling{MaxTokens: 8}}
		if _, err := b.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		advertise(t, a, "B", b.eng.Info().ID, req.Prompt)
		if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := a.router.Verified(); st != (VerifyStats{}) || scorer.calls != 0 {
			t.Fatalf("drawn out, yet %+v, %d calls", st, scorer.calls)
		}
		// A check already in flight: the next drawn reply is skipped.
		a.router.ver.fraction = 1
		a.router.ver.inflight.Store(true)
		if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := a.router.Verified(); st.Drawn != 1 || st.Skipped != 1 || scorer.calls != 0 {
			t.Fatalf("in flight, yet %+v, %d calls", st, scorer.calls)
		}
		// A constrained reply cannot be judged against raw logits.
		a.router.ver.inflight.Store(false)
		creq := req
		creq.Sampling.Constraint = &infer.Constraint{JSONSchema: `{"type":"object"}`}
		a.router.maybeVerify("B", creq, "{}")
		synctest.Wait()
		if st := a.router.Verified(); st.Drawn != 2 || st.Skipped != 2 || scorer.calls != 0 {
			t.Fatalf("constrained, yet %+v, %d calls", st, scorer.calls)
		}
	})
}
