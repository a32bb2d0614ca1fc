package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fixedRTT is an RTTSource with the same RTT to every peer.
type fixedRTT time.Duration

func (f fixedRTT) RTT(PeerID) (time.Duration, bool) { return time.Duration(f), true }

// forwardFunc adapts a function to Forwarder.
type forwardFunc func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error)

func (f forwardFunc) Forward(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	return f(ctx, peer, req, est, emit)
}

// testPeer is one simulated peer: a sim engine behind a Router.
type testPeer struct {
	id     PeerID
	eng    *sim.Engine
	router *Router
	reg    *prometheus.Registry
}

func newSimEngine(t *testing.T) *sim.Engine {
	t.Helper()
	p, _ := sim.Preset("tiny")
	eng, err := sim.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func newTestPeer(t *testing.T, id PeerID, fwd Forwarder) *testPeer {
	t.Helper()
	eng := newSimEngine(t)
	mesh, err := NewMesh(MeshConfig{Self: id, Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := NewRouter(RouterConfig{Engine: eng, Mesh: mesh, Forwarder: fwd, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), Recent: 8})
	if err != nil {
		t.Fatal(err)
	}
	return &testPeer{id: id, eng: eng, router: r, reg: reg}
}

// advertise tells a's mesh that peer holds prompt and is idle and fast.
func advertise(t *testing.T, a *testPeer, peer PeerID, model string, prompt []int32) {
	t.Helper()
	src, err := cache.NewSource(cache.SourceConfig{Peer: string(peer), Model: model, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	tree := cache.NewTree(4, 1<<14)
	tree.Set(0, prompt, 1)
	d, _ := src.Update(tree)
	now := time.Now()
	if _, err := a.router.Mesh().ApplyDigest(peer, d, now); err != nil {
		t.Fatal(err)
	}
	a.router.Mesh().ApplyLoad(peer, Load{Slots: 4, PrefillTokPerSec: 1000, DecodeTokPerSec: 500, Seq: 1}, now)
}

// prompt returns n tokens of the tiny model's vocabulary, distinct per seed.
func prompt(seed, n int) []int32 {
	out := make([]int32, n)
	x := uint64(seed)*2654435761 + 1
	for i := range out {
		x = x*6364136223846793005 + 1442695040888963407
		out[i] = int32(3 + (x>>33)%500)
	}
	return out
}

// collect is a client: it records the pieces it receives.
type collect struct {
	pieces []infer.Piece
	fail   error // returned from emit when set
}

func (c *collect) emit(p infer.Piece) error {
	if c.fail != nil {
		return c.fail
	}
	c.pieces = append(c.pieces, p)
	return nil
}

func (c *collect) tokens() int {
	n := 0
	for _, p := range c.pieces {
		n += p.Tokens
	}
	return n
}

func (c *collect) text() string {
	var b strings.Builder
	for _, p := range c.pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestRouterLocalWithoutPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestPeer(t, "A", nil)
		var c collect
		req := infer.Request{Prompt: prompt(1, 100), Sampling: infer.Sampling{MaxTokens: 5, Temperature: 0}}
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if res.GeneratedTokens != 5 || c.tokens() != 5 {
			t.Fatalf("generated %d, client got %d tokens", res.GeneratedTokens, c.tokens())
		}
		recs := a.router.Recent()
		if len(recs) != 1 || recs[0].Reason != ReasonNoPeers || recs[0].ServedBy != "" {
			t.Fatalf("records %+v", recs)
		}
		if got := counter(t, a.router.met.served.WithLabelValues("local")); got != 1 {
			t.Fatalf("served local = %v", got)
		}
		// The second identical request reuses the cache; the estimate was exact.
		if _, err := a.router.Generate(t.Context(), req, c.emit); err != nil {
			t.Fatal(err)
		}
		recs = a.router.Recent()
		if recs[1].EstimatedCached != recs[1].RealizedCached || recs[1].RealizedCached < 99 {
			t.Fatalf("local estimate %d vs realized %d", recs[1].EstimatedCached, recs[1].RealizedCached)
		}
		if pf, _ := a.router.Speeds().Get(); pf <= 0 {
			t.Fatal("prefill speed not measured")
		}
	})
}

func TestRouterRejectsBadRequestsWithoutForwarding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newTestPeer(t, "A", forwardFunc(func(context.Context, PeerID, infer.Request, int, func(infer.Piece) error) (*infer.Result, error) {
			t.Error("forwarded a bad request")
			return nil, nil
		}))
		_, err := a.router.Generate(t.Context(), infer.Request{}, func(infer.Piece) error { return nil })
		if !errors.Is(err, infer.ErrBadRequest) {
			t.Fatalf("err = %v", err)
		}
	})
}

// pair builds A (the origin) forwarding through fwd, and B, which holds a
// 600-token prompt and is advertised in A's mesh.
func pair(t *testing.T, fwd func(b *testPeer) Forwarder) (a, b *testPeer, req infer.Request) {
	t.Helper()
	b = newTestPeer(t, "B", nil)
	a = newTestPeer(t, "A", fwd(b))
	req = infer.Request{Prompt: prompt(7, 600), Sampling: infer.Sampling{MaxTokens: 8}}
	// Warm B's cache with the same prompt, then tell A.
	if _, err := b.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	advertise(t, a, "B", b.eng.Info().ID, req.Prompt)
	return a, b, req
}

// toPeer forwards to the peer's ServeForwarded, as the p2p layer would.
func toPeer(b *testPeer) Forwarder {
	return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
		if peer != b.id {
			return nil, fmt.Errorf("no route to %s", peer)
		}
		return b.router.ServeForwarded(ctx, req, emit)
	})
}

func TestRouterForwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, req := pair(t, toPeer)
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if res.CachedTokens < 590 || c.tokens() != 8 {
			t.Fatalf("cached %d, client tokens %d", res.CachedTokens, c.tokens())
		}
		rec := a.router.Recent()[0]
		if rec.Reason != ReasonForward || rec.ServedBy != "B" || rec.EstimatedCached != 592 || rec.RealizedCached != res.CachedTokens {
			t.Fatalf("record %+v", rec)
		}
		if got := counter(t, a.router.met.realized.WithLabelValues("peer")); got != float64(res.CachedTokens) {
			t.Fatalf("realized cached metric %v", got)
		}
		if got := counter(t, b.router.met.forwardedIn.WithLabelValues("served")); got != 1 {
			t.Fatalf("B served forwarded %v", got)
		}
		if a.eng.Stats().ServedTotal != 0 {
			t.Fatal("A served it too")
		}
	})
}

func TestRouterBusyFallsBackAndCoolsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		a, _, req := pair(t, func(*testPeer) Forwarder {
			return forwardFunc(func(context.Context, PeerID, infer.Request, int, func(infer.Piece) error) (*infer.Result, error) {
				calls++
				return nil, fmt.Errorf("peer says: %w", infer.ErrBusy)
			})
		})
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil || res.GeneratedTokens != 8 || c.tokens() != 8 {
			t.Fatalf("res %+v err %v tokens %d", res, err, c.tokens())
		}
		rec := a.router.Recent()[0]
		if len(rec.Attempts) != 1 || rec.Attempts[0].Outcome != outcomeBusy || rec.ServedBy != "" {
			t.Fatalf("record %+v", rec)
		}
		// The cooldown keeps B out of the next decision.
		if _, err := a.router.Generate(t.Context(), req, c.emit); err != nil {
			t.Fatal(err)
		}
		if calls != 1 {
			t.Fatalf("forwarded %d times during the cooldown", calls)
		}
		if r := a.router.Recent()[1].Reason; r != ReasonLocal {
			// A now holds the prompt itself: B would not have won anyway.
			t.Fatalf("reason %s", r)
		}
		if got := counter(t, a.router.met.fallbacks.WithLabelValues(outcomeBusy, "before-first-piece")); got != 1 {
			t.Fatalf("fallbacks %v", got)
		}
		st := a.router.Mesh().Peers(time.Now())
		if len(st) != 1 || st[0].CooldownReason != "busy" {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestRouterErrorBeforeFirstPieceTriesNextPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tried []PeerID
		var bPeer *testPeer
		a, b, req := pair(t, func(b *testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
				tried = append(tried, peer)
				if peer == "B" {
					return nil, errors.New("stream reset")
				}
				return bPeer.router.ServeForwarded(ctx, req, emit) // C is B's twin
			})
		})
		bPeer = b
		advertise(t, a, "C", b.eng.Info().ID, req.Prompt)
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil || c.tokens() != 8 || res.CachedTokens < 590 {
			t.Fatalf("res %+v err %v", res, err)
		}
		if fmt.Sprint(tried) != "[B C]" {
			t.Fatalf("tried %v", tried)
		}
		rec := a.router.Recent()[0]
		if rec.ServedBy != "C" || len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != outcomeError {
			t.Fatalf("record %+v", rec)
		}
		st := a.router.Mesh().Peers(time.Now())
		if st[0].Peer != "B" || st[0].Failures != 1 || st[0].CooldownReason != "failure" {
			t.Fatalf("B status %+v", st[0])
		}
	})
}

// TestRouterMidStreamFailureConstrained: a constrained reply broken off
// mid-stream is not continued (the grammar would restart mid-value): the
// client gets an error after the pieces it already has.
func TestRouterMidStreamFailureConstrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, func(b *testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
				n := 0
				_, err := b.router.ServeForwarded(ctx, req, func(p infer.Piece) error {
					if n == 3 {
						return errors.New("peer crashed")
					}
					n++
					return emit(p)
				})
				return nil, fmt.Errorf("stream reset: %w", err)
			})
		})
		req.Sampling.Constraint = &infer.Constraint{JSONSchema: `{"type":"object"}`}
		var c collect
		if _, err := a.router.Generate(t.Context(), req, c.emit); !errors.Is(err, infer.ErrEngine) {
			t.Fatalf("constrained reply broken off: err %v, want ErrEngine", err)
		}
		if len(c.pieces) != 3 {
			t.Fatalf("client got %d pieces, want the 3 the peer sent", len(c.pieces))
		}
	})
}

func TestRouterMidStreamFailureContinuesLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, func(b *testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
				n := 0
				errCrash := errors.New("peer crashed")
				_, err := b.router.ServeForwarded(ctx, req, func(p infer.Piece) error {
					if n == 3 {
						return errCrash
					}
					n++
					return emit(p)
				})
				return nil, fmt.Errorf("stream reset: %w", err)
			})
		})
		// What B alone would have said: the reference reply.
		var whole collect
		if _, err := newSimEngine(t).Generate(t.Context(), req, whole.emit); err != nil {
			t.Fatal(err)
		}
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if c.tokens() != 8 || res.GeneratedTokens != 8 || res.PromptTokens != 600 {
			t.Fatalf("client tokens %d, result %+v", c.tokens(), res)
		}
		// The first three pieces are B's, and they match the reference.
		if !strings.HasPrefix(whole.text(), c.pieces[0].Text+c.pieces[1].Text+c.pieces[2].Text) {
			t.Fatalf("reply %q does not start like %q", c.text(), whole.text())
		}
		rec := a.router.Recent()[0]
		if !rec.Continued || rec.Attempts[0].Pieces != 3 || rec.Attempts[0].Outcome != outcomeError {
			t.Fatalf("record %+v", rec)
		}
		// The local engine was asked for the rest with the prompt extended
		// by the 3 tokens the client has: its cache holds that sequence.
		emitted, _ := a.eng.Tokenize(c.pieces[0].Text + c.pieces[1].Text + c.pieces[2].Text)
		ext := append(append([]int32{}, req.Prompt...), emitted[1:]...)
		if len(ext) != 603 || a.eng.CachedPrefix(ext) != 603 {
			t.Fatalf("local engine holds %d of the %d-token continuation prompt", a.eng.CachedPrefix(ext), len(ext))
		}
		if a.eng.CachedPrefix(append(append([]int32{}, req.Prompt...), 2)) != 600 {
			t.Fatal("continuation prompt does not extend the original")
		}
		if got := counter(t, a.router.met.served.WithLabelValues("continued")); got != 1 {
			t.Fatalf("continued %v", got)
		}
	})
}

func TestRouterHangingPeerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, func(*testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, _ PeerID, _ infer.Request, _ int, _ func(infer.Piece) error) (*infer.Result, error) {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
		})
		start := time.Now()
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil || c.tokens() != 8 {
			t.Fatalf("res %+v err %v", res, err)
		}
		waited := time.Since(start)
		// The watchdog fires after the expected cost plus FirstPieceTimeout;
		// then the local engine serves (about 0.7 s of the tiny model).
		if pol := DefaultPolicy(); waited < pol.FirstPieceTimeout || waited > pol.FirstPieceTimeout+10*time.Second {
			t.Fatalf("waited %v", waited)
		}
		if rec := a.router.Recent()[0]; rec.Attempts[0].Outcome != outcomeTimeout {
			t.Fatalf("record %+v", rec)
		}
	})
}

func TestRouterStalledStreamTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, func(*testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, _ PeerID, _ infer.Request, _ int, emit func(infer.Piece) error) (*infer.Result, error) {
				if err := emit(infer.Piece{Text: " one", Tokens: 1}); err != nil {
					return nil, err
				}
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
		})
		var c collect
		res, err := a.router.Generate(t.Context(), req, c.emit)
		if err != nil || c.tokens() != 8 || c.pieces[0].Text != " one" || res.GeneratedTokens != 8 {
			t.Fatalf("res %+v err %v pieces %v", res, err, c.pieces)
		}
		rec := a.router.Recent()[0]
		if !rec.Continued || rec.Attempts[0].Outcome != outcomeTimeout {
			t.Fatalf("record %+v", rec)
		}
	})
}

func TestRouterClientGoneIsNotAPeerFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, toPeer)
		errGone := errors.New("client went away")
		c := collect{fail: errGone}
		_, err := a.router.Generate(t.Context(), req, c.emit)
		if !errors.Is(err, errGone) {
			t.Fatalf("err = %v", err)
		}
		if st := a.router.Mesh().Peers(time.Now()); st[0].Failures != 0 || st[0].CooldownUntil != nil {
			t.Fatalf("B blamed: %+v", st[0])
		}
		if a.eng.Stats().ServedTotal != 0 {
			t.Fatal("fell back to local for a gone client")
		}
		// A cancelled client context likewise.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := a.router.Generate(ctx, req, (&collect{}).emit); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestServeForwardedRefusesWhenBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTestPeer(t, "B", nil)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		// 4 slots busy and 5 queued: one above the threshold of 4.
		for i := range 9 {
			wg.Go(func() {
				b.eng.Generate(ctx, infer.Request{Prompt: prompt(100+i, 50), Sampling: infer.Sampling{MaxTokens: 1000}}, func(infer.Piece) error { return nil })
			})
		}
		synctest.Wait()
		if st := b.eng.Stats(); st.Queued != 5 {
			t.Fatalf("queued %d", st.Queued)
		}
		_, err := b.router.ServeForwarded(t.Context(), infer.Request{Prompt: prompt(1, 10)}, func(infer.Piece) error { return nil })
		if !errors.Is(err, infer.ErrBusy) {
			t.Fatalf("err = %v", err)
		}
		if got := counter(t, b.router.met.forwardedIn.WithLabelValues("busy")); got != 1 {
			t.Fatalf("busy count %v", got)
		}
		cancel()
		wg.Wait()
		res, err := b.router.ServeForwarded(t.Context(), infer.Request{Prompt: prompt(1, 10), Sampling: infer.Sampling{MaxTokens: 2}}, func(infer.Piece) error { return nil })
		if err != nil || res.GeneratedTokens != 2 {
			t.Fatalf("res %+v err %v", res, err)
		}
	})
}

func TestMeshHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, req := pair(t, toPeer)
		if _, err := a.router.Generate(t.Context(), req, (&collect{}).emit); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		a.router.MeshHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/mesh?recent=1", nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d %q", rec.Code, body)
		}
		var st MeshStatus
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Peers) != 1 || st.Peers[0].Peer != "B" || st.Peers[0].Load == nil || st.Peers[0].RTTMillis == nil ||
			st.Peers[0].DigestBlocks != 37 || len(st.Recent) != 1 || st.Recent[0].ServedBy != "B" {
			t.Fatalf("status %s", body)
		}
		rec = httptest.NewRecorder()
		a.router.MeshHandler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/mesh", nil))
		if rec.Code != 405 {
			t.Fatalf("POST: %d", rec.Code)
		}
	})
}

func TestRouterMetricsRegistered(t *testing.T) {
	a := newTestPeer(t, "A", nil)
	fams, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, want := range []string{"meshllm_mesh_peers_known", "meshllm_router_decision_seconds"} {
		if !names[want] {
			t.Fatalf("%s not registered; have %v", want, names)
		}
	}
	// A second router on the same registry is refused, not silently merged.
	if _, err := NewRouter(RouterConfig{Engine: a.eng, Mesh: a.router.Mesh(), Registry: a.reg}); err == nil {
		t.Fatal("double registration accepted")
	}
}

func TestRecentRing(t *testing.T) {
	r := newRecent(3)
	for i := range 5 {
		r.add(DecisionRecord{PromptTokens: i})
	}
	got := r.list()
	if len(got) != 3 || got[0].PromptTokens != 2 || got[2].PromptTokens != 4 {
		t.Fatalf("ring %+v", got)
	}
}
