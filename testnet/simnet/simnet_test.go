package simnet

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/testnet/workload"
)

func testProfile() sim.Profile {
	return sim.Profile{Name: "t", ContextLength: 4096, VocabSize: 1000, Slots: 64, Parallel: 1,
		BatchTokens: 128, PrefillBase: 0.010, PrefillToken: 0.001, PrefillAttention: 1e-7,
		DecodeToken: 0.005, DecodeAttention: 1e-8}
}

func tokens(seed, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(3 + (seed*7919+i*104729)%997)
	}
	return out
}

// scripted builds a workload of fixed requests: prompts[i] enters at
// entries[i] at times[i].
func scripted(prompts [][]int32, entries []int, times []time.Duration, reply int) *workload.Workload {
	w := &workload.Workload{Name: "scripted"}
	for i, p := range prompts {
		w.Requests = append(w.Requests, workload.Request{ID: i, Session: i, Prompt: p, Reply: tokens(100+i, reply)})
		w.Sessions = append(w.Sessions, workload.Session{Start: times[i], Entry: entries[i], Client: -1, Requests: []int{i}})
	}
	return w
}

// TestPolicyChoices scripts two peers: peer 1 serves a long prompt, then,
// after gossip has carried its digest, the same prefix enters at peer 0.
// Over a 2 ms link the prefix-aware policies forward it to peer 1 and hit
// its cache; over a 1000 ms link meshllm and oracle keep it local and the
// paper's rule still forwards.
func TestPolicyChoices(t *testing.T) {
	prefix := tokens(1, 800)
	second := append(append([]int32{}, prefix...), tokens(2, 40)...)
	w := scripted([][]int32{append(append([]int32{}, prefix...), tokens(3, 40)...), second},
		[]int{1, 0}, []time.Duration{0, 5 * time.Second}, 4)
	cases := []struct {
		policy  string
		link    time.Duration
		forward bool
	}{
		{"local", 2 * time.Millisecond, false},
		{"paper", 2 * time.Millisecond, true},
		{"meshllm", 2 * time.Millisecond, true},
		{"oracle", 2 * time.Millisecond, true},
		{"paper", time.Second, true},
		{"meshllm", time.Second, false},
		{"oracle", time.Second, false},
	}
	for _, tc := range cases {
		p, err := NewPolicy(tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(Config{Peers: 2, Profile: testProfile(), Net: Network{Link: tc.link}, Running: 1}, w, p)
		if err != nil {
			t.Fatal(err)
		}
		rec := r.Records[1]
		if got := rec.Server == 1; got != tc.forward {
			t.Errorf("%s at %v: served by %d, want forwarded=%v", tc.policy, tc.link, rec.Server, tc.forward)
		}
		if tc.forward && rec.Cached < 800/16*16 {
			t.Errorf("%s at %v: forwarded but cached %d", tc.policy, tc.link, rec.Cached)
		}
		if !tc.forward && rec.Cached > 16 {
			t.Errorf("%s at %v: local but cached %d", tc.policy, tc.link, rec.Cached)
		}
		// The forwarded request's latency includes both trips over the link.
		if tc.forward && rec.Done-rec.Arrive < 2*tc.link {
			t.Errorf("%s: latency %v below the round trip", tc.policy, rec.Done-rec.Arrive)
		}
	}
}

// TestGossipStalenessMatters: a request sent right after its prefix got
// cached, before any digest could cross the link, is not forwarded by the
// gossiping policies (they cannot know yet), but the oracle sees it.
func TestGossipStalenessMatters(t *testing.T) {
	prefix := tokens(1, 800)
	w := scripted([][]int32{append(append([]int32{}, prefix...), tokens(3, 40)...), append(append([]int32{}, prefix...), tokens(2, 40)...)},
		[]int{1, 0}, []time.Duration{0, 1000 * time.Millisecond}, 1)
	prof := testProfile()
	prof.BatchTokens = 1024 // one chunk: the tree gets the prompt at once
	for _, name := range []string{"paper", "meshllm", "oracle"} {
		p, _ := NewPolicy(name)
		// Peer 1 holds the prompt from about 0.89 s; no digest of it can
		// cross the 300 ms link before 1.19 s.
		r, err := Run(Config{Peers: 2, Profile: prof, Net: Network{Link: 300 * time.Millisecond}, Announce: 10 * time.Second, Running: 1, Seed: 3}, w, p)
		if err != nil {
			t.Fatal(err)
		}
		want := name == "oracle"
		if got := r.Records[1].Server == 1; got != want {
			t.Errorf("%s: forwarded=%v, want %v", name, got, want)
		}
	}
}

func TestRunDeterministic(t *testing.T) {
	w, err := workload.SharedPrefix(workload.SharedPrefixConfig{Requests: 300, Groups: 6, SystemTokens: 1000, QuestionTokens: 40,
		ReplyTokens: 4, Vocab: 1000, Skew: workload.Skew{Zipf: true, S: 1}, Peers: 4, Arrivals: workload.Arrivals{Rate: 10}, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Peers: 4, Profile: testProfile(), CacheTokens: 4096, Net: Network{Link: 5 * time.Millisecond}, Running: 2, Seed: 9}
	for _, name := range PolicyNames() {
		p, _ := NewPolicy(name)
		a, err := Run(cfg, w, p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Run(cfg, w, p) // the same Policy value, reset by Run
		for i := range a.Records {
			a.Records[i].Decide, b.Records[i].Decide = 0, 0
		}
		if !reflect.DeepEqual(a.Records, b.Records) {
			t.Errorf("%s: two runs differ", name)
		}
		if a.Errors != 0 {
			t.Errorf("%s: %d gossip errors", name, a.Errors)
		}
		switch name {
		case "local":
			if a.Forwarded != 0 {
				t.Errorf("local forwarded %.2f", a.Forwarded)
			}
		case "round-robin":
			if a.MaxShare > 0.26 {
				t.Errorf("round-robin max share %.2f", a.MaxShare)
			}
		}
	}
}

// TestChurn: a peer leaves mid-run and comes back; every request still
// completes, none is served by the peer while it is away.
func TestChurn(t *testing.T) {
	w, err := workload.SharedPrefix(workload.SharedPrefixConfig{Requests: 400, Groups: 4, SystemTokens: 300, QuestionTokens: 30,
		ReplyTokens: 2, Vocab: 1000, Peers: 4, Arrivals: workload.Arrivals{Rate: 20}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	churn := []Churn{{At: 5 * time.Second, Peer: 3}, {At: 12 * time.Second, Peer: 3, Up: true}}
	for _, name := range []string{"meshllm", "paper", "round-robin", "oracle"} {
		p, _ := NewPolicy(name)
		r, err := Run(Config{Peers: 4, Profile: testProfile(), Net: Network{Link: 2 * time.Millisecond}, Running: 1, Churn: churn}, w, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, rc := range r.Records {
			// Work sent to peer 3 after it left (plus the link) is refused.
			if rc.Server == 3 && rc.Arrive > 5*time.Second+10*time.Millisecond && rc.Arrive < 12*time.Second {
				t.Errorf("%s: request %d served by the departed peer", name, rc.ID)
			}
		}
	}
}

func TestSummarize(t *testing.T) {
	recs := []Record{
		{Entry: 0, Server: 0, Arrive: 0, First: time.Second, Done: 2 * time.Second, Prompt: 100, Cached: 0},
		{Entry: 0, Server: 1, Arrive: time.Second, First: 2 * time.Second, Done: 5 * time.Second, Prompt: 100, Cached: 80, Forwarded: true, Attempts: 2},
		{Entry: 1, Server: 1, Arrive: 2 * time.Second, First: 3 * time.Second, Done: 3 * time.Second, Prompt: 200, Cached: 8},
		{Entry: 1, Server: 1, Arrive: 3 * time.Second, First: 4 * time.Second, Done: 7 * time.Second, Prompt: 100, Cached: 100},
	}
	var r Result
	Summarize(&r, recs, 2, 16, 4*time.Second)
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	switch {
	case !near(r.MeanLatency, (2+4+1+4)/4.0), !near(r.P50Latency, 2), !near(r.P99Latency, 4):
		t.Errorf("latency %v %v %v", r.MeanLatency, r.P50Latency, r.P99Latency)
	case !near(r.MeanTTFT, 1):
		t.Errorf("ttft %v", r.MeanTTFT)
	case !near(r.HitRate, 188.0/500), !near(r.RequestHitRate, 0.5):
		t.Errorf("hit %v %v", r.HitRate, r.RequestHitRate)
	case !near(r.Forwarded, 0.25), r.Refusals != 1:
		t.Errorf("forwarded %v refusals %d", r.Forwarded, r.Refusals)
	case !near(r.MaxShare, 0.75), len(r.Shares) != 2, !near(r.Shares[0][1], 0.75), !near(r.VirtualSeconds, 7):
		t.Errorf("shares %v max %v span %v", r.Shares, r.MaxShare, r.VirtualSeconds)
	}
}

// TestEngineMatchesSim runs one request sequence through infer/sim's Engine
// (goroutines, in synctest's virtual time) and through this package's
// event-driven engine, and requires the same cached prefixes and the same
// timings: the harness's engine is the sim engine, not an approximation —
// with every slot running and with one running at a time (Config.Running,
// sim.Options.Running).
func TestEngineMatchesSim(t *testing.T) {
	for _, running := range []int{0, 1} {
		t.Run(fmt.Sprintf("running=%d", running), func(t *testing.T) { engineMatchesSim(t, running) })
	}
}

func engineMatchesSim(t *testing.T, running int) {
	prof := testProfile()
	prof.Slots, prof.Parallel = 2, 1
	base := tokens(7, 300)
	type sub struct {
		at     time.Duration
		prompt []int32
		reply  int
	}
	subs := []sub{
		{0, append(append([]int32{}, base...), tokens(1, 50)...), 3},
		{10 * time.Millisecond, append(append([]int32{}, base...), tokens(2, 700)...), 2},
		{20 * time.Millisecond, tokens(9, 200), 5},
		{2 * time.Second, append(append([]int32{}, base...), tokens(3, 20)...), 1},
	}
	type out struct {
		cached    int
		ttft, end time.Duration
	}
	// Event-driven.
	l := &loop{}
	e := newEngine(l, prof, running)
	got := make([]out, len(subs))
	for i, s := range subs {
		l.at(s.at, func() {
			start := l.now
			e.submit(s.prompt, tokens(50+i, s.reply), nil, func(res *infer.Result) {
				got[i] = out{res.CachedTokens, res.TimeToFirst, l.now - start}
			})
		})
	}
	for l.step() {
	}
	// infer/sim under synctest.
	want := make([]out, len(subs))
	synctest.Test(t, func(t *testing.T) {
		eng, err := sim.NewWithOptions(prof, sim.Options{Running: running})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		t0 := time.Now()
		done := make(chan struct{}, len(subs))
		for i, s := range subs {
			go func() {
				time.Sleep(s.at - time.Since(t0))
				start := time.Now()
				res, err := eng.Generate(context.Background(), infer.Request{Prompt: s.prompt, Sampling: infer.Sampling{MaxTokens: s.reply}},
					func(infer.Piece) error { return nil })
				if err != nil {
					t.Error(err)
				} else {
					want[i] = out{res.CachedTokens, res.TimeToFirst, time.Since(start)}
				}
				done <- struct{}{}
			}()
			synctest.Wait() // submissions in order
		}
		for range subs {
			<-done
		}
	})
	for i := range subs {
		if got[i] != want[i] {
			t.Errorf("request %d: simnet %+v, infer/sim %+v", i, got[i], want[i])
		}
	}
}

func BenchmarkRunMeshllm(b *testing.B) {
	w, err := workload.SharedPrefix(workload.SharedPrefixConfig{Requests: 500, Groups: 8, SystemTokens: 500, QuestionTokens: 50,
		ReplyTokens: 4, Vocab: 1000, Peers: 8, Arrivals: workload.Arrivals{Rate: 20}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	p, _ := NewPolicy("meshllm")
	for b.Loop() {
		if _, err := Run(Config{Peers: 8, Profile: testProfile(), Net: Network{Link: 10 * time.Millisecond}, Running: 1}, w, p); err != nil {
			b.Fatal(err)
		}
	}
}
