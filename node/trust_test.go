package node

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
)

func newTrust(t *testing.T, mod ...func(*TrustConfig)) *Trust {
	t.Helper()
	cfg := DefaultTrustConfig()
	for _, m := range mod {
		m(&cfg)
	}
	tr, err := NewTrust(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTrustJudge(t *testing.T) {
	c := DefaultTrustConfig()
	for _, tc := range []struct {
		name string
		cl   Claim
		want bool
	}{
		{"exact", Claim{EstimatedCached: 592, RealizedCached: 599, Expected: 50 * time.Millisecond, Took: 60 * time.Millisecond}, true},
		{"no claim", Claim{Expected: time.Second, Took: time.Second}, true},
		{"lost a few blocks", Claim{EstimatedCached: 592, RealizedCached: 540, Expected: time.Second, Took: time.Second}, true},
		{"small claim within slack", Claim{EstimatedCached: 64, RealizedCached: 0, Expected: time.Second, Took: time.Second}, true},
		{"claimed all, held none", Claim{EstimatedCached: 592, RealizedCached: 0, Expected: time.Second, Took: time.Second}, false},
		{"held under half", Claim{EstimatedCached: 592, RealizedCached: 280, Expected: time.Second, Took: time.Second}, false},
		{"slow within factor", Claim{Expected: 100 * time.Millisecond, Took: 899 * time.Millisecond}, true},
		{"too slow", Claim{Expected: 100 * time.Millisecond, Took: 901 * time.Millisecond}, false},
		{"timed out", Claim{TimedOut: true}, false},
	} {
		if got := c.Judge(tc.cl); got != tc.want {
			t.Errorf("%s: Judge(%+v) = %v, want %v", tc.name, tc.cl, got, tc.want)
		}
	}
}

func TestTrustFallsOnLiesAndRecovers(t *testing.T) {
	tr := newTrust(t)
	t0 := time.Unix(1000, 0)
	lie := Claim{EstimatedCached: 592, RealizedCached: 0, Expected: 50 * time.Millisecond, Took: 600 * time.Millisecond}
	honest := Claim{EstimatedCached: 592, RealizedCached: 599, Expected: 50 * time.Millisecond, Took: 60 * time.Millisecond}
	if got := tr.Get("L", t0); got != 1 {
		t.Fatalf("fresh peer trust %v", got)
	}
	// ceil(log(0.2)/log(0.5)) = 3 lies exclude a fresh peer.
	for i, want := range []float64{0.5, 0.25, 0.125} {
		if tr.Observe("L", lie, t0) {
			t.Fatal("a lie judged honest")
		}
		if got := tr.Get("L", t0); got != want {
			t.Fatalf("after %d lies trust %v, want %v", i+1, got, want)
		}
	}
	v := tr.Apply(View{Now: t0, Peers: []PeerView{{ID: "H", EstimatedCached: 100}, {ID: "L", EstimatedCached: 592}}})
	if len(v.Peers) != 1 || v.Peers[0].ID != "H" || v.Peers[0].EstimatedCached != 100 {
		t.Fatalf("excluded peer still in view: %+v", v.Peers)
	}
	// Recovery by time: distrust halves each half-life.
	h := tr.Config().RecoveryHalfLife
	if got, want := tr.Get("L", t0.Add(h)), 1-0.875/2; math.Abs(got-want) > 1e-9 {
		t.Fatalf("after a half-life trust %v, want %v", got, want)
	}
	// Recovery by honest results: +HitCredit each.
	t1 := t0.Add(h)
	tr.Observe("L", honest, t1)
	if got, want := tr.Get("L", t1), 1-0.875/2+0.05; math.Abs(got-want) > 1e-9 {
		t.Fatalf("after an honest result trust %v, want %v", got, want)
	}
	st := tr.Peers(t1)
	if len(st) != 1 || st[0].Peer != "L" || st[0].Claims != 4 || st[0].Failed != 3 {
		t.Fatalf("status %+v", st)
	}
}

func TestTrustScalesClaims(t *testing.T) {
	tr := newTrust(t)
	now := time.Unix(1000, 0)
	tr.Observe("P", Claim{TimedOut: true}, now) // 0.5
	v := tr.Apply(View{Now: now, Peers: []PeerView{{ID: "P", EstimatedCached: 600, PrefillTokPerSec: 1000, DecodeTokPerSec: 100}}})
	if p := v.Peers[0]; p.EstimatedCached != 300 || p.PrefillTokPerSec != 500 || p.DecodeTokPerSec != 50 {
		t.Fatalf("scaled view %+v", p)
	}
}

func TestTrustGossipScore(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := newTrust(t, func(c *TrustConfig) { c.Now = func() time.Time { return now } })
	lie := Claim{EstimatedCached: 592, Expected: time.Millisecond, Took: time.Millisecond}
	for _, want := range []float64{0, -50, -75, -87.5} {
		tr.Observe("L", lie, now)
		if got := tr.GossipScore("L"); got != want {
			t.Fatalf("gossip score %v, want %v", got, want)
		}
	}
	if got := tr.GossipScore("stranger"); got != 0 {
		t.Fatalf("unknown peer's score %v", got)
	}
}

func TestTrustBoundedPeers(t *testing.T) {
	tr := newTrust(t, func(c *TrustConfig) { c.MaxPeers = 3 })
	t0 := time.Unix(1000, 0)
	for i, id := range []PeerID{"a", "b", "c", "d"} {
		tr.Observe(id, Claim{TimedOut: true}, t0.Add(time.Duration(i)*time.Second))
	}
	st := tr.Peers(t0.Add(time.Minute))
	if len(st) != 3 || st[0].Peer != "b" {
		t.Fatalf("kept %+v, want b, c, d", st)
	}
}

func TestTrustConfigValidate(t *testing.T) {
	if err := DefaultTrustConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*TrustConfig){
		func(c *TrustConfig) { c.MissFactor = 1 },
		func(c *TrustConfig) { c.TimeFactor = 0.5 },
		func(c *TrustConfig) { c.RecoveryHalfLife = 0 },
		func(c *TrustConfig) { c.ExcludeBelow = math.NaN() },
		func(c *TrustConfig) { c.MaxPeers = 0 },
		func(c *TrustConfig) { c.CacheMissFraction = 2 },
	}
	for i, m := range bad {
		c := DefaultTrustConfig()
		m(&c)
		if c.Validate() == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}

// TestTrustInRouterAndStatus: a peer that claims a cached prompt and
// serves it cold loses half its trust, which /v1/mesh reports, and its
// next claim on the same prompt no longer wins.
func TestTrustInRouterAndStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		a, _, req := pair(t, func(b *testPeer) Forwarder {
			return forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
				calls++
				res, err := b.router.ServeForwarded(ctx, req, emit)
				if err == nil {
					res.CachedTokens = 0 // what a peer that lied about its cache reports
				}
				return res, err
			})
		})
		if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		st := a.router.Status(false)
		if len(st.Peers) != 1 || st.Peers[0].Trust == nil || *st.Peers[0].Trust != 0.5 {
			t.Fatalf("status peers %+v", st.Peers)
		}
		body, err := json.Marshal(st)
		if err != nil || !strings.Contains(string(body), `"trust":0.5`) {
			t.Fatalf("JSON %s, %v", body, err)
		}
		// More prompts on the same prefix: the peer keeps lying and is
		// excluded after its third failed claim; the rest stay local.
		for i := range 4 {
			req2 := infer.Request{Prompt: append(append([]int32{}, req.Prompt[:560]...), prompt(99+i, 40)...), Sampling: req.Sampling}
			if _, err := a.router.Generate(t.Context(), req2, func(infer.Piece) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if calls != 3 {
			t.Fatalf("forwarded %d times to the lying peer, want 3", calls)
		}
		if got := a.router.Trust().Get("B", time.Now()); got >= DefaultTrustConfig().ExcludeBelow {
			t.Fatalf("trust %v", got)
		}
	})
}
