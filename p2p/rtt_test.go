package p2p

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// fakeClock is a manually advanced clock for the estimator.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestEstimator(clk *fakeClock) *RTTEstimator {
	cfg := DefaultRTTConfig()
	cfg.Now = clk.Now
	return NewRTTEstimator(cfg)
}

const ms = time.Millisecond

func mustRTT(t *testing.T, e *RTTEstimator, p peer.ID) time.Duration {
	t.Helper()
	d, ok := e.RTT(p)
	if !ok {
		t.Fatalf("no estimate for %s", p)
	}
	return d
}

func near(a, b, tol time.Duration) bool { return a-b <= tol && b-a <= tol }

func TestRTTUnknownPeer(t *testing.T) {
	e := newTestEstimator(newFakeClock())
	if _, ok := e.RTT("nobody"); ok {
		t.Fatal("estimate for a peer never observed")
	}
	e.Observe("p", 0)
	e.Observe("p", -time.Second)
	if _, ok := e.RTT("p"); ok {
		t.Fatal("non-positive samples were taken in")
	}
}

func TestRTTFirstAndSteadySamples(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	e.Observe("p", 30*ms)
	if got := mustRTT(t, e, "p"); got != 30*ms {
		t.Fatalf("first sample: %v, want 30ms", got)
	}
	for range 50 {
		clk.Advance(time.Second)
		e.Observe("p", 30*ms)
	}
	st, _ := e.Stats("p")
	if st.Smoothed != 30*ms || st.Min != 30*ms || st.Last != 30*ms || st.Samples != 51 || !st.Updated.Equal(clk.Now()) {
		t.Fatalf("steady stats: %+v", st)
	}
}

func TestRTTIsolatedSpikeIsCapped(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	for range 20 {
		e.Observe("p", 10*ms)
		clk.Advance(time.Second)
	}
	e.Observe("p", 500*ms) // a ping stuck behind a GC pause
	got := mustRTT(t, e, "p")
	// Capped at 4 x 10 ms, then weighted by 1/8: 10 + (40-10)/8.
	if want := 10*ms + 30*ms/8; !near(got, want, 10*time.Microsecond) {
		t.Fatalf("after one 500ms spike: %v, want %v", got, want)
	}
	// A plain EWMA would be at 10 + 490/8 = 71 ms. The next normal samples
	// pull it back.
	for range 30 {
		clk.Advance(time.Second)
		e.Observe("p", 10*ms)
	}
	if got := mustRTT(t, e, "p"); !near(got, 10*ms, 100*time.Microsecond) {
		t.Fatalf("did not recover: %v", got)
	}
}

func TestRTTPersistentPathChangeIsAdopted(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	for range 20 {
		e.Observe("p", 10*ms)
		clk.Advance(time.Second)
	}
	// The route changed: every sample is now about 200 ms.
	slow := []time.Duration{210 * ms, 200 * ms, 230 * ms, 205 * ms, 220 * ms}
	if len(slow) != spikeConfirm {
		t.Fatalf("test assumes spikeConfirm = %d", len(slow))
	}
	for i, d := range slow {
		e.Observe("p", d)
		clk.Advance(time.Second)
		if got := mustRTT(t, e, "p"); i < spikeConfirm-1 && got > 40*ms {
			t.Fatalf("sample %d: estimate %v above the 4x cap", i, got)
		}
	}
	st, _ := e.Stats("p")
	if st.Smoothed != 200*ms || st.Min != 200*ms {
		t.Fatalf("after %d slow samples: %+v, want the smallest of them (200ms) for both", spikeConfirm, st)
	}
	// And back to fast: the new minimum is taken at once and the
	// estimate drops to its cap at once, then follows the EWMA.
	e.Observe("p", 10*ms)
	st, _ = e.Stats("p")
	if st.Min != 10*ms || st.Smoothed != 40*ms {
		t.Fatalf("back to 10ms: %+v, want min 10ms and estimate capped at 40ms", st)
	}
	// 30 ms off decays by 7/8 a sample: under 0.1 ms after 43.
	for range 45 {
		clk.Advance(time.Second)
		e.Observe("p", 10*ms)
	}
	if got := mustRTT(t, e, "p"); !near(got, 10*ms, 100*time.Microsecond) {
		t.Fatalf("did not settle at 10ms: %v", got)
	}
}

func TestRTTSpikesInterruptedAreNotAPathChange(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	e.Observe("p", 10*ms)
	for range 10 {
		for range spikeConfirm - 1 {
			clk.Advance(time.Second)
			e.Observe("p", 300*ms)
		}
		clk.Advance(time.Second)
		e.Observe("p", 10*ms)
	}
	if st, _ := e.Stats("p"); st.Min != 10*ms || st.Smoothed > 40*ms {
		t.Fatalf("stalls broken by normal samples moved the estimate: %+v", st)
	}
}

func TestRTTModerateChangeConvergesAtAlpha(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	e.Observe("p", 10*ms)
	// Doubling stays under the spike cap: plain EWMA with gain 1/8.
	const k = 20
	for range k {
		clk.Advance(time.Second)
		e.Observe("p", 20*ms)
	}
	want := 20*ms - time.Duration(float64(10*ms)*math.Pow(1-0.125, k))
	if got := mustRTT(t, e, "p"); !near(got, want, 10*time.Microsecond) {
		t.Fatalf("after %d samples of 20ms: %v, want %v", k, got, want)
	}
}

func TestRTTMinimumExpiresWithWindow(t *testing.T) {
	clk := newFakeClock()
	e := newTestEstimator(clk)
	win := DefaultRTTConfig().MinWindow
	e.Observe("p", 10*ms)
	for elapsed := time.Duration(0); elapsed <= win+10*time.Second; elapsed += 10 * time.Second {
		clk.Advance(10 * time.Second)
		e.Observe("p", 15*ms)
	}
	st, _ := e.Stats("p")
	if st.Min != 15*ms {
		t.Fatalf("minimum %v still held after the window, want 15ms", st.Min)
	}
}

func TestRTTForgetAndPeersAreIndependent(t *testing.T) {
	e := newTestEstimator(newFakeClock())
	e.Observe("a", 5*ms)
	e.Observe("b", 50*ms)
	if mustRTT(t, e, "a") != 5*ms || mustRTT(t, e, "b") != 50*ms {
		t.Fatal("peers mixed up")
	}
	e.Forget("a")
	if _, ok := e.RTT("a"); ok {
		t.Fatal("forgotten peer still has an estimate")
	}
	if e.Len() != 1 {
		t.Fatalf("Len %d, want 1", e.Len())
	}
}

func TestRTTNoSpikeCap(t *testing.T) {
	clk := newFakeClock()
	cfg := DefaultRTTConfig()
	cfg.Now, cfg.SpikeFactor = clk.Now, 0
	e := NewRTTEstimator(cfg)
	e.Observe("p", 10*ms)
	e.Observe("p", 90*ms)
	if got, want := mustRTT(t, e, "p"), 20*ms; !near(got, want, time.Microsecond) {
		t.Fatalf("uncapped EWMA %v, want %v", got, want)
	}
}

// TestMinFilterProperties checks the windowed minimum against brute force
// on random sample streams: what it returns is a sample from inside the
// window, no smaller than the true minimum of the window and no larger
// than the newest sample; and when the true minimum is the newest sample,
// it is exact.
func TestMinFilterProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const win = 10 * time.Second
	for run := range 100 {
		type sample struct {
			t time.Time
			v time.Duration
		}
		var m minFilter
		var hist []sample
		now := time.Unix(0, 0)
		for i := range 300 {
			now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			v := time.Duration(1+rng.Int64N(100)) * ms
			var got time.Duration
			if i == 0 {
				m.reset(now, v)
				got = v
			} else {
				got = m.update(now, v, win)
			}
			hist = append(hist, sample{now, v})
			trueMin := v
			inWindow := false
			for _, s := range hist {
				if now.Sub(s.t) <= win {
					trueMin = min(trueMin, s.v)
					if s.v == got {
						inWindow = true
					}
				}
			}
			if got < trueMin || got > v || !inWindow {
				t.Fatalf("run %d step %d: filter %v, window min %v, newest %v, in window %v", run, i, got, trueMin, v, inWindow)
			}
			if trueMin == v && got != v {
				t.Fatalf("run %d step %d: newest sample %v is the minimum, filter says %v", run, i, v, got)
			}
		}
	}
}

func TestRTTConcurrentUse(t *testing.T) {
	e := NewRTTEstimator(DefaultRTTConfig())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := peer.ID(rune('a' + g%2))
			for i := range 1000 {
				e.Observe(p, time.Duration(1+i%7)*ms)
				e.RTT(p)
				e.Stats(p)
				if i%100 == 0 {
					e.Forget(p)
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkRTTObserve(b *testing.B) {
	e := NewRTTEstimator(DefaultRTTConfig())
	peers := []peer.ID{"a", "b", "c", "d", "e", "f", "g", "h"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.Observe(peers[i%len(peers)], time.Duration(10+i%5)*ms)
	}
}

func BenchmarkRTTRead(b *testing.B) {
	e := NewRTTEstimator(DefaultRTTConfig())
	e.Observe("a", ms)
	b.ReportAllocs()
	for b.Loop() {
		e.RTT("a")
	}
}

// TestRTTFilterBeatsPlainEWMAOnStalls replays a 10 ms path with 0-1 ms
// jitter where 5% of the pings stall 100-300 ms (a peer busy prefilling, a
// GC pause) and compares the estimator with the plain EWMA the peerstore
// keeps. The path's true round trip is the jitter's mean, 10.5 ms.
func TestRTTFilterBeatsPlainEWMAOnStalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	clk := newFakeClock()
	e := newTestEstimator(clk)
	const truth = 10*ms + ms/2
	var plain float64
	var errOurs, errPlain, worstOurs, worstPlain time.Duration
	const n = 5000
	for i := range n {
		d := 10*ms + time.Duration(rng.Int64N(int64(ms)))
		if rng.Float64() < 0.05 {
			d += 100*ms + time.Duration(rng.Int64N(int64(200*ms)))
		}
		clk.Advance(10 * time.Second)
		e.Observe("p", d)
		if i == 0 {
			plain = float64(d)
		} else {
			plain += 0.125 * (float64(d) - plain)
		}
		ours := mustRTT(t, e, "p")
		abs := func(x time.Duration) time.Duration { return max(x, -x) }
		errOurs += abs(ours - truth)
		errPlain += abs(time.Duration(plain) - truth)
		worstOurs = max(worstOurs, abs(ours-truth))
		worstPlain = max(worstPlain, abs(time.Duration(plain)-truth))
	}
	t.Logf("mean abs error: estimator %v, plain EWMA %v; worst: %v vs %v", errOurs/n, errPlain/n, worstOurs, worstPlain)
	if errOurs*4 > errPlain {
		t.Fatalf("estimator error %v not 4x below the plain EWMA's %v", errOurs/n, errPlain/n)
	}
	if worstOurs > 3*truth {
		t.Fatalf("estimator strayed %v from a %v path", worstOurs, truth)
	}
}
