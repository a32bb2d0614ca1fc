package dashboard

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/node/forward"
	"github.com/prometheus/client_golang/prometheus"
)

func TestDescribeDecision(t *testing.T) {
	long := node.PeerID("12D3KooWQ8mZxDbw5e1Kc2VUTVwJYfH4Uq7rZ3aBcDeF9xyz12")
	cases := []struct {
		name string
		rec  node.DecisionRecord
		kind string
		want []string
	}{
		{"local", node.DecisionRecord{Reason: node.ReasonLocal, PromptTokens: 100, RealizedCached: 64, LocalCostMillis: 120, PeerCostMillis: 130},
			feedLocal, []string{"served locally", "64 of 100", "120 ms", "best peer 130 ms"}},
		{"no peers", node.DecisionRecord{Reason: node.ReasonNoPeers, PromptTokens: 10},
			feedLocal, []string{"no peer to forward to"}},
		{"forward policy", node.DecisionRecord{Reason: node.ReasonForwardPolicy, Forward: forward.Members},
			feedLocal, []string{"forward setting (members) excludes every peer"}},
		{"forwarded", node.DecisionRecord{Reason: node.ReasonForward, Chosen: long, ServedBy: long, PromptTokens: 600, EstimatedCached: 560,
			LocalCostMillis: 1500, PeerCostMillis: 90, Attempts: []node.Attempt{{Peer: long, Outcome: "served"}}},
			feedForwarded, []string{"forwarded to …9xyz12", "560 of 600", "90 ms", "1.50 s"}},
		{"refused", node.DecisionRecord{Reason: node.ReasonRefusedRTT, LocalCostMillis: 300, PeerCostMillis: 800},
			feedRefused, []string{"link cost more than the prefill it saves", "800 ms there", "300 ms here"}},
		{"push-back", node.DecisionRecord{Reason: node.ReasonPushBack},
			feedPushBack, []string{"pushing back"}},
		{"fell back local", node.DecisionRecord{Reason: node.ReasonForward, Chosen: "B", Attempts: []node.Attempt{{Peer: "B", Outcome: "busy"}}},
			feedFallback, []string{"B answered busy", "served locally"}},
		{"fell back to next peer", node.DecisionRecord{Reason: node.ReasonForward, Chosen: "B", ServedBy: "C",
			Attempts: []node.Attempt{{Peer: "B", Outcome: "timeout"}, {Peer: "C", Outcome: "served"}}},
			feedFallback, []string{"B timed out", "forwarded to C instead"}},
		{"continued", node.DecisionRecord{Reason: node.ReasonForward, Chosen: "B", Continued: true,
			Attempts: []node.Attempt{{Peer: "B", Outcome: "error", Pieces: 3}}},
			feedFallback, []string{"B failed", "mid-reply"}},
		{"failed", node.DecisionRecord{Reason: node.ReasonLocal, Err: "engine closed"},
			feedFailed, []string{"failed: engine closed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := describeDecision(c.rec)
			if ev.Kind != c.kind {
				t.Errorf("kind %q, want %q (summary %q)", ev.Kind, c.kind, ev.Summary)
			}
			for _, w := range c.want {
				if !strings.Contains(ev.Summary, w) {
					t.Errorf("summary %q lacks %q", ev.Summary, w)
				}
			}
		})
	}
}

func rec(start time.Time, prompt int) node.DecisionRecord {
	return node.DecisionRecord{Time: start, PromptTokens: prompt, DurationMillis: float64(prompt) / 7}
}

func TestDecisionCursor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := func(i int) node.DecisionRecord { return rec(t0.Add(time.Duration(i)*time.Millisecond), i) }
	var c decisionCursor
	if got := c.advance(nil); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
	if got := c.advance([]node.DecisionRecord{r(1), r(2)}); len(got) != 2 {
		t.Fatalf("first listing: %d new, want 2", len(got))
	}
	if got := c.advance([]node.DecisionRecord{r(1), r(2)}); len(got) != 0 {
		t.Fatalf("unchanged: %d new", len(got))
	}
	// The ring is full: the oldest fell out while two came in.
	got := c.advance([]node.DecisionRecord{r(2), r(3), r(4)})
	if len(got) != 2 || got[0].PromptTokens != 3 || got[1].PromptTokens != 4 {
		t.Fatalf("after wrap: %+v", got)
	}
	// More came in than the ring holds: everything listed is new.
	if got := c.advance([]node.DecisionRecord{r(7), r(8), r(9)}); len(got) != 3 {
		t.Fatalf("overrun: %d new, want 3", len(got))
	}
	// Records finished out of start order are still found by identity.
	if got := c.advance([]node.DecisionRecord{r(8), r(9), r(6)}); len(got) != 1 || got[0].PromptTokens != 6 {
		t.Fatalf("out of order: %+v", got)
	}
}

func TestDashSampleOf(t *testing.T) {
	now := time.Unix(50, 0)
	evs := []DecisionEvent{
		describeDecision(node.DecisionRecord{Reason: node.ReasonLocal, PromptTokens: 100, RealizedCached: 50}),
		describeDecision(node.DecisionRecord{Reason: node.ReasonForward, ServedBy: "B", PromptTokens: 100, RealizedCached: 100,
			Attempts: []node.Attempt{{Peer: "B", Outcome: "served"}}}),
		describeDecision(node.DecisionRecord{Reason: node.ReasonForward, Attempts: []node.Attempt{{Peer: "C", Outcome: "busy"}}, PromptTokens: 200}),
		describeDecision(node.DecisionRecord{Reason: node.ReasonLocal, Err: "boom", PromptTokens: 1000}),
	}
	s := dashSampleOf(now, "A", evs)
	if s.Requests != 4 || s.Forwarded != 1 || s.Fallbacks != 1 || s.Failed != 1 {
		t.Fatalf("counts: %+v", s)
	}
	if s.Served["A"] != 2 || s.Served["B"] != 1 || len(s.Served) != 2 {
		t.Fatalf("served: %v", s.Served)
	}
	if s.PromptTokens != 400 || s.CachedTokens != 150 || s.HitRate == nil || *s.HitRate != 150.0/400 {
		t.Fatalf("hit rate: %+v", s)
	}
	if empty := dashSampleOf(now, "A", nil); empty.HitRate != nil || empty.Served != nil || !empty.Time.Equal(now) {
		t.Fatalf("empty sample: %+v", empty)
	}
}

func TestTTFTCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ttftMetric, Buckets: prometheus.DefBuckets}, []string{"api"})
	reg.MustRegister(h)
	var c ttftCounter
	if _, ok := c.delta(nil); ok {
		t.Fatal("nil registry reported a TTFT")
	}
	if _, ok := c.delta(reg); ok {
		t.Fatal("no observations reported a TTFT")
	}
	h.WithLabelValues("openai").Observe(0.1)
	h.WithLabelValues("ollama").Observe(0.3)
	if m, ok := c.delta(reg); !ok || m < 199.9 || m > 200.1 {
		t.Fatalf("mean %v %v, want 200 ms", m, ok)
	}
	if _, ok := c.delta(reg); ok {
		t.Fatal("an interval without observations reported a TTFT")
	}
	h.WithLabelValues("openai").Observe(0.05)
	if m, ok := c.delta(reg); !ok || m < 49.9 || m > 50.1 {
		t.Fatalf("second interval: %v %v, want 50 ms", m, ok)
	}
}

// forwardingPair returns peer A, which knows that B holds hot and forwards
// to B's ServeForwarded, and B.
func forwardingPair(t *testing.T, hot []int32) (a, b *testPeer) {
	t.Helper()
	b = newTestPeer(t, "B", nil)
	a = newTestPeer(t, "A", forwardFunc(func(ctx context.Context, peer node.PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
		return b.router.ServeForwarded(ctx, req, emit)
	}))
	if _, err := b.router.Generate(t.Context(), infer.Request{Prompt: hot, Sampling: infer.Sampling{MaxTokens: 2}}, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	advertise(t, a, "B", a.eng.Info().ID, hot)
	return a, b
}

func TestDashboardStep(t *testing.T) {
	hot := prompt(7, 256)
	a, _ := forwardingPair(t, hot)
	// A decision made before the dashboard existed is not news.
	if _, err := a.router.Generate(t.Context(), infer.Request{Prompt: prompt(8, 40), Sampling: infer.Sampling{MaxTokens: 2}}, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// A's own cache: one 40-token prompt served by its engine.
	if _, err := a.eng.Generate(t.Context(), infer.Request{Prompt: prompt(10, 40), Sampling: infer.Sampling{MaxTokens: 1}}, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	d, err := New(Config{Router: a.router, Now: func() time.Time { return now }, History: 3, Decisions: 2,
		HotPrefixes: HotPrefixes(a.eng, 4, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Snapshot(); len(s.Decisions) != 0 || len(s.Samples) != 0 || s.Self != "A" {
		t.Fatalf("fresh snapshot: %+v", s)
	}
	req := infer.Request{Prompt: append(append([]int32{}, hot...), prompt(9, 8)...), Sampling: infer.Sampling{MaxTokens: 2}}
	if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	d.Step()
	s := d.Snapshot()
	if len(s.Decisions) != 1 || s.Decisions[0].Kind != feedForwarded || s.Decisions[0].ServedBy != "B" {
		t.Fatalf("decisions after a forward: %+v", s.Decisions)
	}
	if len(s.Samples) != 1 || s.Samples[0].Served["B"] != 1 || s.Samples[0].Forwarded != 1 || s.Seq != 1 {
		t.Fatalf("sample after a forward: %+v seq %d", s.Samples, s.Seq)
	}
	if len(s.Status.Peers) != 1 || s.Status.Peers[0].Peer != "B" || s.Status.Peers[0].DigestBlocks == 0 {
		t.Fatalf("status: %+v", s.Status)
	}
	if len(s.HotPrefixes) == 0 || s.HotPrefixes[0].Tokens < 40 || s.HotPrefixes[0].Tokens > 41 {
		t.Fatalf("A's hot prefixes: %+v (A's engine served a 40-token prompt)", s.HotPrefixes)
	}
	// Three more requests (local or forwarded: A has not measured its own
	// speed): the feed keeps 2, the history 3 samples.
	for i := range 3 {
		now = now.Add(time.Second)
		if _, err := a.router.Generate(t.Context(), infer.Request{Prompt: prompt(20+i, 20), Sampling: infer.Sampling{MaxTokens: 2}}, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		d.Step()
	}
	s = d.Snapshot()
	if len(s.Decisions) != 2 || s.Decisions[1].PromptTokens != 20 || s.Decisions[0].PromptTokens != 20 {
		t.Fatalf("feed: %+v", s.Decisions)
	}
	if k := s.Decisions[0].Kind; k != feedLocal && k != feedForwarded {
		t.Fatalf("feed kind %q", k)
	}
	if len(s.Samples) != 3 || !s.Samples[0].Time.Equal(time.Unix(101, 0)) || !s.Samples[2].Time.Equal(time.Unix(103, 0)) || s.Seq != 4 {
		t.Fatalf("history: %+v", s.Samples)
	}
}

func TestHotPrefixes(t *testing.T) {
	eng := newSimEngine(t)
	for i, n := range []int{50, 30, 70} {
		if _, err := eng.Generate(t.Context(), infer.Request{Prompt: prompt(i, n), Sampling: infer.Sampling{MaxTokens: 1}}, func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var heads [][]int32
	got := HotPrefixes(eng, 2, func(toks []int32) string {
		heads = append(heads, toks)
		if slices.Equal(toks, prompt(2, 70)[:labelTokens]) {
			return "seventy"
		}
		return "" // falls back to the hash label
	})()
	if len(got) != 2 {
		t.Fatalf("got %+v, want the 2 most recent", got)
	}
	// Most recent first: the 70-token prompt (plus its reply), then 30.
	if got[0].Tokens < 70 || got[0].Tokens > 72 || got[1].Tokens < 30 || got[1].Tokens > 32 {
		t.Fatalf("order: %+v", got)
	}
	if got[0].Label != "seventy" || !strings.HasPrefix(got[1].Label, "#") || len(got[1].Label) != 7 {
		t.Fatalf("labels: %+v", got)
	}
	if got[0].Sequences != 1 || got[0].Slots != 1 {
		t.Fatalf("counts: %+v", got[0])
	}
	if len(heads) != 3 {
		t.Fatalf("label was called %d times, want once per cached sequence (3)", len(heads))
	}
	for _, h := range heads {
		if len(h) != labelTokens && len(h) != got[1].Tokens {
			t.Fatalf("label saw %d tokens, want %d (or all of the 30-token prompt's)", len(h), labelTokens)
		}
	}
	// Sequences that share a label are one family: the longest length,
	// the sum of slots.
	fam := HotPrefixes(eng, 5, func([]int32) string { return "all" })()
	if len(fam) != 1 || fam[0].Label != "all" || fam[0].Sequences != 3 || fam[0].Slots != 3 || fam[0].Tokens != got[0].Tokens {
		t.Fatalf("one family: %+v", fam)
	}
	if hashLabel(prompt(1, 32)) != hashLabel(prompt(1, 32)) || hashLabel(prompt(1, 32)) == hashLabel(prompt(2, 32)) {
		t.Fatal("hash labels are not a function of the tokens")
	}
}
