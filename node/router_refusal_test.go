package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/prometheus/client_golang/prometheus"
)

// This file attacks an origin from a serving peer that claims every prefix
// and then fails every forward: it must not keep receiving prompts.

// hostileID is the attacking peer's ID.
const hostileID PeerID = "H"

// claimEverything tells a's mesh, now, that hostileID holds every prefix
// (a snapshot whose Bloom filter has every bit set) and is idle at 100x
// the tiny model's speeds, so that even its trust-scaled claims keep
// winning until it is excluded. seq must grow with every call.
func claimEverything(t *testing.T, r *Router, bloom *cache.Bloom, seq uint64) {
	t.Helper()
	d := &cache.Digest{Kind: cache.KindSnapshot, Peer: string(hostileID), Model: r.Info().ID,
		BlockSize: cache.DefaultBlockSize, Epoch: 1, Seq: seq, Held: 1 << 16, Filter: bloom}
	now := time.Now()
	if _, err := r.Mesh().ApplyDigest(hostileID, d, now); err != nil {
		t.Fatal(err)
	}
	r.Mesh().ApplyLoad(hostileID, Load{Slots: 4, PrefillTokPerSec: 1e5, DecodeTokPerSec: 5e4, Seq: seq}, now)
}

// failingForwarder answers every forward to hostileID with err, counting
// them in *calls. Only the test's goroutine forwards, so no lock.
func failingForwarder(err error, calls *int) Forwarder {
	return forwardFunc(func(context.Context, PeerID, infer.Request, int, func(infer.Piece) error) (*infer.Result, error) {
		*calls++
		return nil, err
	})
}

// TestFailingPeerGetsAtMostThreeForwards: a peer that advertises every
// prefix and answers every forward with a bad request (or any other
// failure but busy) used to receive every prompt (60 of 60 for a bad
// request: neither trust nor a cooldown noticed). Each such failure now
// halves its trust and puts it on the doubling failure cooldown: three
// take it below ExcludeBelow, so it gets at most 3 of 60 requests sent 3 s
// apart (a 3-minute run; recovery readmits it only after ~4 minutes). The
// client never sees the peer's error: each refused request is served
// locally.
func TestFailingPeerGetsAtMostThreeForwards(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"bad-request", fmt.Errorf("%w: remote: I refuse everything", infer.ErrBadRequest)},
		{"context-overflow", fmt.Errorf("%w: remote: prompt too long", infer.ErrContextOverflow)},
		{"unknown-model", fmt.Errorf("%w: remote: no such model", infer.ErrUnknownModel)},
		{"unsupported", fmt.Errorf("%w: remote: not here", infer.ErrUnsupported)},
		{"engine", fmt.Errorf("%w: remote: crashed", infer.ErrEngine)},
		{"reset", errors.New("stream reset")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				a := newTestPeer(t, "A", failingForwarder(tc.err, &calls))
				bloom := fullBloom(t)
				const requests = 60
				for i := range requests {
					claimEverything(t, a.router, bloom, uint64(i+1))
					var c collect
					req := infer.Request{Prompt: prompt(3000+i, 600), Sampling: infer.Sampling{MaxTokens: 8}}
					res, err := a.router.Generate(t.Context(), req, c.emit)
					if err != nil || res.GeneratedTokens != 8 || c.tokens() != 8 {
						t.Fatalf("request %d: res %+v err %v, client got %d tokens", i, res, err, c.tokens())
					}
					time.Sleep(3 * time.Second)
				}
				t.Logf("%s: the peer received %d of %d requests", tc.name, calls, requests)
				if calls == 0 {
					t.Fatal("the peer never attracted a request: the test shows nothing")
				}
				if calls > 3 {
					t.Errorf("the peer received %d of %d requests, bound 3", calls, requests)
				}
				now := time.Now()
				tr := a.router.Trust()
				if v := tr.Get(hostileID, now); v >= tr.Config().ExcludeBelow {
					t.Errorf("trust in the peer %.3f, want below %.2f", v, tr.Config().ExcludeBelow)
				}
				for _, s := range tr.Peers(now) {
					if s.Peer == hostileID && (s.Claims != int64(calls) || s.Failed != s.Claims) {
						t.Errorf("trust judged %+v after %d failed forwards", s, calls)
					}
				}
			})
		})
	}
}

// TestBusyPeerKeepsTrust: busy is the one failure that is not held
// against a peer's trust (a loaded honest peer says it); it only puts the
// peer on the push-back cooldown.
func TestBusyPeerKeepsTrust(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		a := newTestPeer(t, "A", failingForwarder(fmt.Errorf("%w: remote: queue full", infer.ErrBusy), &calls))
		bloom := fullBloom(t)
		for i := range 10 {
			claimEverything(t, a.router, bloom, uint64(i+1))
			req := infer.Request{Prompt: prompt(3000+i, 600), Sampling: infer.Sampling{MaxTokens: 8}}
			if _, err := a.router.Generate(t.Context(), req, (&collect{}).emit); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
		}
		if calls < 2 {
			t.Fatalf("busy peer tried %d times: the test shows nothing", calls)
		}
		if v := a.router.Trust().Get(hostileID, time.Now()); v != 1 {
			t.Fatalf("trust in a busy peer %v, want 1", v)
		}
	})
}

// pickyEngine is the sim engine refusing, as a bad request, requests whose
// stop strings include refuseStop: a request infer.Validate accepts and
// the engine does not (as llama.cpp's grammar check refuses some schemas).
type pickyEngine struct {
	infer.Engine
}

const refuseStop = "\x00refuse"

func (e pickyEngine) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	for _, s := range req.Sampling.Stop {
		if s == refuseStop {
			return nil, infer.BadRequestf("this engine refuses %q", s)
		}
	}
	return e.Engine.Generate(ctx, req, emit)
}

// TestRefusalOfARequestTheOriginRefusesBlamesNoOne: a peer that refuses a
// request which the origin's own engine refuses too was right: the client
// gets the local engine's bad request, and the peer keeps its trust and
// gets no cooldown. (A refusal of a request the local engine serves is
// the peer's fault: TestFailingPeerGetsAtMostThreeForwards.)
func TestRefusalOfARequestTheOriginRefusesBlamesNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		eng := pickyEngine{newSimEngine(t)}
		mesh, err := NewMesh(MeshConfig{Self: "A", Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: DefaultPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRouter(RouterConfig{Engine: eng, Mesh: mesh, Registry: prometheus.NewRegistry(),
			Forwarder: failingForwarder(fmt.Errorf("%w: remote: refused", infer.ErrBadRequest), &calls),
			Logger:    slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		claimEverything(t, r, fullBloom(t), 1)
		req := infer.Request{Prompt: prompt(3000, 600), Sampling: infer.Sampling{MaxTokens: 8, Stop: []string{refuseStop}}}
		var c collect
		if _, err := r.Generate(t.Context(), req, c.emit); !errors.Is(err, infer.ErrBadRequest) {
			t.Fatalf("err %v, want the local engine's bad request", err)
		}
		if calls != 1 || len(c.pieces) != 0 {
			t.Fatalf("forwarded %d times (want 1), client got %d pieces", calls, len(c.pieces))
		}
		now := time.Now()
		if v := r.Trust().Get(hostileID, now); v != 1 {
			t.Errorf("trust in a peer that refused a bad request: %v, want 1", v)
		}
		if st := r.Mesh().Peers(now); len(st) != 1 || st[0].Failures != 0 || st[0].CooldownUntil != nil {
			t.Errorf("peer blamed for refusing a bad request: %+v", st)
		}
		// The same peer refusing a request the engine serves is blamed.
		req.Sampling.Stop = nil
		if _, err := r.Generate(t.Context(), req, (&collect{}).emit); err != nil {
			t.Fatal(err)
		}
		if v := r.Trust().Get(hostileID, time.Now()); v >= 1 {
			t.Errorf("trust in a peer that refused a valid request: %v, want < 1", v)
		}
	})
}
