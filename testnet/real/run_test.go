package real

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/testnet/workload"
)

// stepClock is a clock that moves 1 ms at every reading. Safe for
// concurrent use.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// noSleep records the pauses asked for and returns at once.
type noSleep struct {
	mu    sync.Mutex
	total time.Duration
}

func (s *noSleep) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.total += max(d, 0)
	s.mu.Unlock()
	return ctx.Err()
}

func sharedPrefix(t *testing.T, requests, peers int, arr workload.Arrivals) *workload.Workload {
	t.Helper()
	w, err := workload.SharedPrefix(workload.SharedPrefixConfig{Requests: requests, Groups: 3, SystemTokens: 64,
		QuestionTokens: 8, ReplyTokens: 2, Vocab: 512, Peers: peers, Arrivals: arr, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRunMetricsFromServers drives two fake peers, the second forwarding
// everything to the first, and checks every metric against what the
// servers saw: entry mapping, hit rates from cached_tokens, forwarding and
// shares from the counters, and latency and TTFT from the clock.
func TestRunMetricsFromServers(t *testing.T) {
	m := newFakeMesh(t, 2, map[int]int{1: 0})
	// One closed-loop client: requests go one at a time, so the stepping
	// clock gives every request the same times (send at +1 ms, first piece
	// at +2 ms, end at +3 ms from the arrival reading).
	w := sharedPrefix(t, 30, 2, workload.Arrivals{Clients: 1, Think: 250 * time.Millisecond})
	clock, sl := &stepClock{t: time.Unix(1000, 0)}, &noSleep{}
	var progress []int
	res, err := Run(context.Background(), Config{Targets: m.urls, Now: clock.Now, Sleep: sl.Sleep,
		Progress: func(done, total int) { progress = append(progress, done) }}, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 30 || res.Failed != 0 || len(m.log) != 30 || len(progress) != 30 || progress[29] != 30 {
		t.Fatalf("requests %d failed %d served %d progress %v", res.Requests, res.Failed, len(m.log), progress)
	}
	if res.Model.Name != "fake-model" || res.Model.VocabSize != 512 {
		t.Errorf("model %+v", res.Model)
	}
	// Each request entered where its session says, in the workload's order.
	var prompt, cached, hits, fwd int
	for i, got := range m.log {
		req := w.Requests[i]
		if want := w.Sessions[req.Session].Entry; got.entry != want || got.prompt != len(req.Prompt) || got.maxTokens != len(req.Reply) {
			t.Errorf("request %d: entered %d with %d tokens, max %d; want %d, %d, %d", i, got.entry, got.prompt, got.maxTokens,
				want, len(req.Prompt), len(req.Reply))
		}
		prompt += got.prompt
		cached += got.cached
		if got.cached >= 16 {
			hits++
		}
		if got.server != got.entry {
			fwd++
		}
	}
	if hits == 0 || fwd == 0 || fwd == 30 {
		t.Fatalf("the scenario does not exercise hits (%d) and forwards (%d)", hits, fwd)
	}
	if !near(res.HitRate, float64(cached)/float64(prompt)) || !near(res.RequestHitRate, float64(hits)/30) {
		t.Errorf("hit rates %.4f %.4f, want %.4f %.4f", res.HitRate, res.RequestHitRate, float64(cached)/float64(prompt), float64(hits)/30)
	}
	if !near(res.Forwarded, float64(fwd)/30) {
		t.Errorf("forwarded %.4f, want %.4f", res.Forwarded, float64(fwd)/30)
	}
	// Everything was served by peer 0.
	if res.Counted != 30 || res.Served[0] != 30 || res.Served[1] != 0 || res.MaxShare != 1 {
		t.Errorf("served %v counted %g max share %g", res.Served, res.Counted, res.MaxShare)
	}
	if !near(res.MeanLatency, 0.002) || !near(res.P99Latency, 0.002) || !near(res.MeanTTFT, 0.001) {
		t.Errorf("latency mean %g p99 %g, TTFT %g; want 0.002, 0.002, 0.001", res.MeanLatency, res.P99Latency, res.MeanTTFT)
	}
	// Think time between sessions: every session after the first.
	if want := 29 * 250 * time.Millisecond; sl.total != want {
		t.Errorf("slept %s, want %s", sl.total, want)
	}
}

// TestRunOpenLoop sends sessions concurrently at their start times; the
// sleeps asked for are the start offsets, and the metrics still add up.
func TestRunOpenLoop(t *testing.T) {
	m := newFakeMesh(t, 3, nil)
	w := sharedPrefix(t, 40, 3, workload.Arrivals{Rate: 50})
	sl := &noSleep{}
	res, err := Run(context.Background(), Config{Targets: m.urls, Sleep: sl.Sleep}, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 40 || res.Forwarded != 0 || res.Counted != 40 {
		t.Errorf("requests %d forwarded %g counted %g", res.Requests, res.Forwarded, res.Counted)
	}
	perEntry := make([]float64, 3)
	for _, s := range w.Sessions {
		perEntry[s.Entry]++
	}
	for p := range 3 {
		if res.Served[p] != perEntry[p] {
			t.Errorf("peer %d served %g, %g sessions entered there", p, res.Served[p], perEntry[p])
		}
	}
	if sl.total <= 0 {
		t.Error("open-loop sessions did not wait for their start")
	}
	if res.MeanLatency <= 0 || res.MeanTTFT <= 0 || res.MeanTTFT > res.MeanLatency {
		t.Errorf("latency %g TTFT %g", res.MeanLatency, res.MeanTTFT)
	}
}

// TestRunCountsFailures leaves failed requests out of the metrics and
// fails the run only when nothing succeeded.
func TestRunCountsFailures(t *testing.T) {
	m := newFakeMesh(t, 2, nil)
	m.fail = func(n int) bool { return n%3 == 0 }
	w := sharedPrefix(t, 12, 2, workload.Arrivals{Clients: 1})
	res, err := Run(context.Background(), Config{Targets: m.urls, Sleep: (&noSleep{}).Sleep}, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 4 || res.Requests != 8 || !strings.Contains(res.FirstError, "503") {
		t.Errorf("failed %d (%q), measured %d", res.Failed, res.FirstError, res.Requests)
	}

	m.fail = func(int) bool { return true }
	if _, err := Run(context.Background(), Config{Targets: m.urls, Sleep: (&noSleep{}).Sleep}, w); err == nil {
		t.Error("a run where every request failed succeeded")
	}
}

func TestRunNeedsTargets(t *testing.T) {
	w := sharedPrefix(t, 2, 1, workload.Arrivals{Clients: 1})
	if _, err := Run(context.Background(), Config{}, w); err == nil {
		t.Error("no targets: no error")
	}
	if _, err := Run(context.Background(), Config{Targets: []string{"http://127.0.0.1:1"}}, w); err == nil {
		t.Error("unreachable target: no error")
	}
}

// TestRunWithoutRouters measures targets whose counters never move (plain
// `meshllm serve` peers): each request counts as served where it entered.
func TestRunWithoutRouters(t *testing.T) {
	frozen := []Counters{{}, {}}
	res := &Result{}
	res.Requests = 20
	res.MaxShare, res.Forwarded = 0.6, 0
	res.fromCounters([][]Counters{frozen, frozen})
	if res.MaxShare != 0.6 || res.Forwarded != 0 || res.Counted != 0 {
		t.Errorf("frozen counters changed the entry-based figures: %+v", res)
	}
}
