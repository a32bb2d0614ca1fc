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
	// The peer moved behind a relay: every sample is now 200 ms.
	for i := range spikeConfirm {
		e.Observe("p", 200*ms)
		clk.Advance(time.Second)
		if got := mustRTT(t, e, "p"); i < spikeConfirm-1 && got > 40*ms {
			t.Fatalf("sample %d: estimate %v above the cap", i, got)
		}
	}
	st, _ := e.Stats("p")
	if st.Smoothed != 200*ms || st.Min != 200*ms {
		t.Fatalf("after %d slow samples: %+v, want 200ms both", spikeConfirm, st)
	}
	// And back to fast: a new minimum is taken at once, the EWMA follows.
	e.Observe("p", 10*ms)
	st, _ = e.Stats("p")
	if st.Min != 10*ms {
		t.Fatalf("new minimum not taken: %+v", st)
	}
	if want := 200*ms - 190*ms/8; !near(st.Smoothed, want, 10*time.Microsecond) {
		t.Fatalf("smoothed %v, want %v", st.Smoothed, want)
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
	for run := range 200 {
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
