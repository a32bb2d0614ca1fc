package vtmesh

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/bench"
	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/meshllm/meshllm/testnet/simnet"
	"github.com/meshllm/meshllm/testnet/workload"
)

var zipf = workload.Skew{Zipf: true, S: 1.1}

func mmluWorkload(t *testing.T, peers, requests int, rate float64, skew workload.Skew) *workload.Workload {
	t.Helper()
	set, err := mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
	if err != nil {
		t.Skipf("MMLU data: %v", err)
	}
	w, err := workload.MMLU(workload.MMLUConfig{Set: set, Requests: requests, Skew: skew,
		Vocab: bench.PaperProfile().VocabSize, Peers: peers, Arrivals: workload.Arrivals{Rate: rate}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startCluster starts cfg's cluster inside t's synctest bubble and closes
// it when the test ends (after the test's own defers).
func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// ask sends prompt (a one-token reply) through p's Router and returns the
// result and the router's decision record.
func ask(t *testing.T, p *Peer, prompt []int32) (*infer.Result, node.DecisionRecord) {
	t.Helper()
	res, err := p.Router.Generate(t.Context(), infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: 1}},
		func(infer.Piece) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec := p.Router.Recent()
	return res, rec[len(rec)-1]
}

// paperConfig is one cell of the `paper` scenario of `meshllm bench`
// (bench.Scenario("paper")): 4 peers, the 0.5B-class profile, half the
// subjects' prefixes fit a peer's cache, one request runs at a time.
func paperConfig(peers int, link time.Duration, forward bool) Config {
	return Config{Peers: peers, Profile: bench.PaperProfile(), CacheTokens: bench.HalfSubjects, Running: 1,
		Link: link, Forward: forward}
}

// runVT runs w on a virtual-time cluster of cfg; wall is the wall-clock
// time it took.
func runVT(t *testing.T, cfg Config, w *workload.Workload) (r *simnet.Result, wall time.Duration) {
	t.Helper()
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		var err error
		r, err = startCluster(t, cfg).Run(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
	})
	return r, time.Since(start)
}

// runSim runs the same experiment in the discrete-event simulation.
func runSim(t *testing.T, cfg Config, w *workload.Workload) *simnet.Result {
	t.Helper()
	pol := "local"
	if cfg.Forward {
		pol = "meshllm"
	}
	p, err := simnet.NewPolicy(pol)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r, err := simnet.Run(sc.Simnet(), w, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func row(link time.Duration, skew string, v, s *simnet.Result, wall time.Duration) string {
	return fmt.Sprintf("| %v | %s | %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.1f |",
		link, skew, v.Policy, v.MeanLatency, s.MeanLatency, v.P99Latency, s.P99Latency,
		v.HitRate, s.HitRate, v.Forwarded, s.Forwarded, v.MaxShare, s.MaxShare, v.GossipBytesPerPeerSec, wall.Seconds())
}

const header = "| link | skew | policy | mean s (real p2p) | mean s (simnet) | p99 s (real p2p) | p99 s (simnet) | hit (real) | hit (sim) | fwd (real) | fwd (sim) | max share (real) | max share (sim) | gossip B/peer/s (real) | wall s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// TestAgreesWithSimnet runs cells of the `paper` scenario on real peers —
// GossipSub, infer streams, snapshot pulls, pings, Routers — in virtual
// time, and in the discrete-event simulation that `meshllm bench` uses,
// and checks that the two agree: exactly where no network is involved
// (`local`: both run infer/sim's schedule), and within stated tolerances
// for `meshllm`, whose real peers learn RTTs by pinging, announce on their
// own phases and stream replies piece by piece. It also checks the goals
// on the real code: forwarding pays at 2 ms and never costs at 1000 ms.
func TestAgreesWithSimnet(t *testing.T) {
	w := mmluWorkload(t, 4, 300, 8, zipf)
	t.Log("\n" + header)
	mean := map[string]float64{}
	for _, link := range []time.Duration{2 * time.Millisecond, time.Second} {
		for _, fwd := range []bool{false, true} {
			cfg := paperConfig(4, link, fwd)
			v, wall := runVT(t, cfg, w)
			s := runSim(t, cfg, w)
			t.Log(row(link, zipf.String(), v, s, wall))
			mean[fmt.Sprint(v.Policy, link)] = v.MeanLatency
			if v.Requests != len(w.Requests) {
				t.Fatalf("%s %v: %d of %d requests served", v.Policy, link, v.Requests, len(w.Requests))
			}
			if !fwd {
				if math.Abs(v.MeanLatency-s.MeanLatency) > 1e-3*s.MeanLatency || math.Abs(v.HitRate-s.HitRate) > 1e-9 || v.Forwarded != 0 {
					t.Errorf("local at %v: real peers %.4f s hit %.4f fwd %.3f, simnet %.4f s hit %.4f: the engines differ",
						link, v.MeanLatency, v.HitRate, v.Forwarded, s.MeanLatency, s.HitRate)
				}
				continue
			}
			if math.Abs(v.HitRate-s.HitRate) > 0.05 || math.Abs(v.Forwarded-s.Forwarded) > 0.1 ||
				math.Abs(v.MeanLatency-s.MeanLatency) > 0.2*s.MeanLatency {
				t.Errorf("meshllm at %v: real peers mean %.3f hit %.3f fwd %.3f, simnet mean %.3f hit %.3f fwd %.3f",
					link, v.MeanLatency, v.HitRate, v.Forwarded, s.MeanLatency, s.HitRate, s.Forwarded)
			}
			if v.GossipBytesPerPeerSec <= 0 {
				t.Errorf("meshllm at %v: no gossip received", link)
			}
		}
	}
	if l, m := mean["local2ms"], mean["meshllm2ms"]; m > 0.9*l {
		t.Errorf("at 2 ms real peers' routing gains too little: meshllm %.3f s vs local %.3f s", m, l)
	}
	if l, m := mean["local1s"], mean["meshllm1s"]; m > l*1.001 {
		t.Errorf("at 1000 ms real peers' routing costs: meshllm %.3f s vs local %.3f s", m, l)
	}
}

// TestPaperScenario runs the `paper` scenario's grid on real peers in
// virtual time beside the discrete-event simulation and prints a markdown
// table (docs/results.md, "Real p2p code in virtual time"). It is opt-in:
//
//	MESHLLM_VTMESH=1 go test ./testnet/vtmesh -run PaperScenario -v -timeout 30m
//
// MESHLLM_VTMESH_REQUESTS (default 2000), MESHLLM_VTMESH_PEERS (default 4)
// and MESHLLM_VTMESH_LINKS_MS (default 2,200,1000) change the grid;
// requests arrive at 2 per peer per second. MESHLLM_VTMESH_CHURN=F makes a
// fraction F of the peers leave a third of the way through and come back
// at two thirds, as `meshllm bench --scenario churn` does.
func TestPaperScenario(t *testing.T) {
	if os.Getenv("MESHLLM_VTMESH") == "" {
		t.Skip("set MESHLLM_VTMESH=1 to run the paper scenario on real p2p code in virtual time")
	}
	requests := envInt(t, "MESHLLM_VTMESH_REQUESTS", 2000)
	peers := envInt(t, "MESHLLM_VTMESH_PEERS", 4)
	links := []time.Duration{2 * time.Millisecond, 200 * time.Millisecond, time.Second}
	if s := os.Getenv("MESHLLM_VTMESH_LINKS_MS"); s != "" {
		links = nil
		for _, f := range strings.Split(s, ",") {
			ms, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			links = append(links, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	var churn []simnet.Churn
	if f := os.Getenv("MESHLLM_VTMESH_CHURN"); f != "" {
		frac, err := strconv.ParseFloat(f, 64)
		if err != nil || frac <= 0 || frac >= 1 {
			t.Fatalf("MESHLLM_VTMESH_CHURN=%q: want a fraction in (0, 1)", f)
		}
		span := time.Duration(float64(requests) / (2 * float64(peers)) * float64(time.Second))
		for i := range max(1, int(frac*float64(peers))) {
			churn = append(churn, simnet.Churn{At: span / 3, Peer: peers - 1 - i},
				simnet.Churn{At: 2 * span / 3, Peer: peers - 1 - i, Up: true})
		}
	}
	out := []string{header}
	for _, skew := range []workload.Skew{workload.Uniform, zipf} {
		w := mmluWorkload(t, peers, requests, 2*float64(peers), skew) // the paper scenario's 8/s on 4 peers
		for _, link := range links {
			for _, fwd := range []bool{false, true} {
				cfg := paperConfig(peers, link, fwd)
				cfg.Churn = churn
				v, wall := runVT(t, cfg, w)
				out = append(out, row(link, skew.String(), v, runSim(t, cfg, w), wall))
				t.Log(out[len(out)-1])
			}
		}
	}
	fmt.Println(strings.Join(out, "\n"))
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestChurn: a peer leaves a third of the way through the run (its host
// closes; TestPeerLossMidStream covers a stream cut that way) and comes
// back with the same identity, an empty cache and a new epoch. Every request must still succeed; while it is
// away no request is served by it, after it returns it serves again; and
// the run agrees with the discrete-event simulation of the same churn.
func TestChurn(t *testing.T) {
	w := mmluWorkload(t, 4, 400, 8, zipf)
	const gone = 3
	leave, back := 15*time.Second, 30*time.Second
	cfg := paperConfig(4, 2*time.Millisecond, true)
	cfg.Churn = []simnet.Churn{{At: leave, Peer: gone}, {At: back, Peer: gone, Up: true}}
	v, wall := runVT(t, cfg, w) // fails on any failed request
	s := runSim(t, cfg, w)
	t.Log("\n" + header + "\n" + row(cfg.Link, zipf.String(), v, s, wall))
	var during, after int
	for _, r := range v.Records {
		switch {
		case r.Arrive > leave+time.Second && r.Done < back && r.Server == gone:
			during++
		case r.Arrive > back && r.Server == gone:
			after++
		}
	}
	t.Logf("served by peer %d while away: %d, after returning: %d", gone, during, after)
	if during > 0 || after == 0 {
		t.Errorf("peer %d served %d requests while away and %d after returning", gone, during, after)
	}
	if math.Abs(v.MeanLatency-s.MeanLatency) > 0.2*s.MeanLatency {
		t.Errorf("mean latency under churn: real peers %.3f s, simnet %.3f s", v.MeanLatency, s.MeanLatency)
	}
}

// TestPeerLossMidStream: peer 0 forwards a long reply to peer 3, which
// holds the prompt's prefix; peer 3 leaves the network after five pieces.
// The stream resets, peer 0's router continues the reply on its own engine,
// and the client gets every token and no error — real libp2p streams and
// the real Router, in virtual time.
func TestPeerLossMidStream(t *testing.T) {
	w := mmluWorkload(t, 4, 1, 8, zipf)
	prompt := w.Requests[0].Prompt
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, paperConfig(4, 2*time.Millisecond, true))
		ps := c.Peers()
		ask(t, ps[3], prompt)
		time.Sleep(3 * time.Second) // peer 3's digest reaches the others

		const reply = 20 // short: a long decode would outweigh the prefill saved, and it would not be forwarded
		tr := &served{server: -1}
		ctx := context.WithValue(t.Context(), servedKey{}, tr)
		pieces, stopped := 0, make(chan error, 1)
		res, err := ps[0].Router.Generate(ctx, infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: reply}},
			func(p infer.Piece) error {
				pieces += p.Tokens
				if pieces == 5 {
					go func() { stopped <- c.stop(3) }()
				}
				return nil
			})
		if err != nil {
			t.Fatalf("the client saw the peer's loss: %v", err)
		}
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if tr.attempts != 1 || tr.server != -1 {
			t.Fatalf("attempts %d, served by %d: want one forward to peer 3, then local; decision %+v; mesh %+v", tr.attempts, tr.server, ps[0].Router.Recent(), ps[0].Mesh.View(prompt, node.LocalView{}, time.Now()))
		}
		if pieces != reply {
			t.Fatalf("the client got %d of %d tokens (result %+v)", pieces, reply, res)
		}
		rec := ps[0].Router.Recent()
		t.Logf("decision: %+v", rec[len(rec)-1])
	})
}

// TestRefusesCostlyLink: peer 1 holds a prompt's prefix and peer 0 gets
// the same prompt. Over 2 ms links peer 0 forwards it; over 1000 ms links
// (RTT measured by real libp2p pings through the simulated QUIC path) it
// refuses — the link costs more than the prefill it would save — and the
// decision says so.
func TestRefusesCostlyLink(t *testing.T) {
	w := mmluWorkload(t, 2, 1, 8, zipf)
	prompt := w.Requests[0].Prompt
	for _, tc := range []struct {
		link time.Duration
		want node.Reason
	}{{2 * time.Millisecond, node.ReasonForward}, {time.Second, node.ReasonRefusedRTT}} {
		synctest.Test(t, func(t *testing.T) {
			c := startCluster(t, paperConfig(2, tc.link, true))
			ps := c.Peers()
			ask(t, ps[1], prompt)
			time.Sleep(3 * time.Second) // peer 1's digest reaches peer 0
			res, d := ask(t, ps[0], prompt)
			v := ps[0].Mesh.View(prompt, node.LocalView{}, time.Now())
			if len(v.Peers) != 1 || v.Peers[0].EstimatedCached == 0 || !v.Peers[0].RTTKnown {
				t.Fatalf("%v links: peer 0 does not know peer 1's prefix and RTT: %+v", tc.link, v)
			}
			if d.Reason != tc.want {
				t.Fatalf("%v links: decision %+v, want %s", tc.link, d, tc.want)
			}
			t.Logf("%v links (RTT measured %v): %s (local %.0f ms, peer %.0f ms), peer 1 holds %d tokens, cached %d of %d",
				tc.link, v.Peers[0].RTT, d.Reason, d.LocalCostMillis, d.PeerCostMillis, v.Peers[0].EstimatedCached, res.CachedTokens, res.PromptTokens)
		})
	}
}

// TestPushBack: peer 1 holds two prompts' prefixes, then gets a queue past
// the busy threshold (one request runs at a time, eight of its own wait,
// about a second each). Its load announcement carries the push-back flag
// over GossipSub to peer 0, which serves the first prompt itself (its
// queue alone makes peer 1 lose, so the decision may read served-local
// rather than push-back). Once the queue drains and the cooldown passes,
// peer 0 forwards the second prompt to it again.
func TestPushBack(t *testing.T) {
	w := mmluWorkload(t, 2, 20, 8, workload.Uniform)
	first, second := w.Requests[0].Prompt, []int32(nil) // two subjects: peer 0 caches the first when it serves it
	for _, r := range w.Requests[1:] {
		if r.Group != w.Requests[0].Group {
			second = r.Prompt
			break
		}
	}
	if second == nil {
		t.Fatal("no second subject in the workload")
	}
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, paperConfig(2, 2*time.Millisecond, true))
		ps := c.Peers()
		ask(t, ps[1], first)
		ask(t, ps[1], second)
		time.Sleep(2 * time.Second) // peer 1's digest reaches peer 0
		var busy sync.WaitGroup
		defer busy.Wait() // before Close, which would fail them
		for range 9 {     // straight to the engine: peer 1's own router would spread them
			busy.Go(func() {
				if _, err := ps[1].Engine.Generate(t.Context(), infer.Request{Prompt: first, Sampling: infer.Sampling{MaxTokens: 100}},
					func(infer.Piece) error { return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(1500 * time.Millisecond) // an announcement with the queue
		if v := ps[0].Mesh.View(first, node.LocalView{}, time.Now()); len(v.Peers) != 1 || !v.Peers[0].PushBack || v.Peers[0].EstimatedCached == 0 {
			t.Fatalf("peer 0 does not see peer 1's prefix and push-back: %+v", v)
		}
		if _, d := ask(t, ps[0], first); d.Reason == node.ReasonForward || len(d.Attempts) > 0 {
			t.Fatalf("with peer 1 pushing back: decision %+v, want local", d)
		}
		busy.Wait()
		time.Sleep(ps[0].Mesh.Policy().PushBackCooldown + 2*time.Second)
		if _, d := ask(t, ps[0], second); d.Reason != node.ReasonForward {
			t.Fatalf("after peer 1 drained: decision %+v, want %s", d, node.ReasonForward)
		}
	})
}
