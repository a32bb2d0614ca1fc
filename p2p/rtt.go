package p2p

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// RTTStats is what the estimator knows about one peer.
type RTTStats struct {
	// Smoothed is the estimate RTT returns: an EWMA of spike-capped
	// samples.
	Smoothed time.Duration
	// Min is the smallest sample within the last MinWindow: the path's
	// base round trip.
	Min time.Duration
	// Last is the latest sample, uncapped.
	Last time.Duration
	// Samples counts the samples taken in.
	Samples int
	// Updated is when the latest sample arrived (estimator clock).
	Updated time.Time
}

// RTTEstimator keeps a round-trip estimate per peer from ping timings and
// from stream timings reported by other code (ObserveRTT).
//
// Why not the peerstore's LatencyEWMA: it averages every sample, so one
// ping that waited behind a busy CPU (a peer prefilling a prompt on all
// cores) or a GC pause moves it for many rounds; 18 ms was seen for a
// 0.3 ms loopback path. The router already charges a peer's queue and
// compute separately, so RTT must be the network's share only.
//
// How: each peer has a windowed minimum (Kathleen Nichols' algorithm, as
// in BBR's min_rtt and Linux's win_minmax) over MinWindow, which is the
// path's base delay, and an EWMA (gain Alpha) of samples capped at
// SpikeFactor times that minimum, and the estimate itself never exceeds
// that cap. An isolated spike is capped and barely moves the estimate;
// when spikeConfirm samples in a row exceed the cap, the path itself has
// changed (a new route), and the estimator restarts from the smallest of
// those samples instead of staying capped for a whole window. (Most path
// changes come with a reconnect, which forgets the peer anyway, and a
// faster path is taken at once as a new minimum.)
//
// RTTEstimator is safe for concurrent use. It reads time only through
// RTTConfig.Now.
type RTTEstimator struct {
	cfg RTTConfig
	now func() time.Time

	mu    sync.Mutex
	peers map[peer.ID]*rttState
}

// spikeConfirm is how many capped samples in a row count as a path change:
// with 5% of pings stalled independently, five in a row happen once in
// 3 million samples (a year of pings at 10 s).
const spikeConfirm = 5

type rttState struct {
	min     minFilter
	srtt    float64 // nanoseconds
	last    time.Duration
	updated time.Time
	n       int
	spikes  int           // capped samples in a row
	spikeLo time.Duration // the smallest of them
}

// NewRTTEstimator returns an empty estimator. cfg must pass the checks of
// Config.Validate (Alpha in (0,1], MinWindow > 0, SpikeFactor 0 or >= 1).
func NewRTTEstimator(cfg RTTConfig) *RTTEstimator {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &RTTEstimator{cfg: cfg, now: now, peers: make(map[peer.ID]*rttState)}
}

// Observe takes in one round-trip sample for p. Non-positive samples are
// ignored.
func (e *RTTEstimator) Observe(p peer.ID, d time.Duration) {
	if d <= 0 {
		return
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.peers[p]
	if s == nil {
		s = &rttState{}
		e.peers[p] = s
	}
	s.last, s.updated = d, now
	s.n++
	if s.n == 1 {
		s.min.reset(now, d)
		s.srtt = float64(d)
		return
	}
	base := s.min.update(now, d, e.cfg.MinWindow)
	x := float64(d)
	f := e.cfg.SpikeFactor
	if f > 0 && x > f*float64(base) {
		if s.spikes == 0 || d < s.spikeLo {
			s.spikeLo = d
		}
		s.spikes++
		if s.spikes >= spikeConfirm {
			// The path changed: start over from its smallest sample.
			s.min.reset(now, s.spikeLo)
			s.srtt = float64(s.spikeLo)
			s.spikes = 0
			return
		}
		x = f * float64(base)
	} else {
		s.spikes = 0
	}
	s.srtt += e.cfg.Alpha * (x - s.srtt)
	if f > 0 {
		s.srtt = min(s.srtt, f*float64(base))
	}
}

// RTT returns the smoothed round-trip estimate for p, and false when there
// is no sample (never measured, or forgotten after a disconnect).
func (e *RTTEstimator) RTT(p peer.ID) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.peers[p]
	if s == nil {
		return 0, false
	}
	return time.Duration(s.srtt), true
}

// Stats returns everything known about p.
func (e *RTTEstimator) Stats(p peer.ID) (RTTStats, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.peers[p]
	if s == nil {
		return RTTStats{}, false
	}
	return RTTStats{
		Smoothed: time.Duration(s.srtt),
		Min:      s.min.get(),
		Last:     s.last,
		Samples:  s.n,
		Updated:  s.updated,
	}, true
}

// Forget drops p's state.
func (e *RTTEstimator) Forget(p peer.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.peers, p)
}

// Len returns the number of peers with an estimate.
func (e *RTTEstimator) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.peers)
}

// minSample is one entry of the windowed minimum.
type minSample struct {
	t time.Time
	v time.Duration
}

// minFilter is Kathleen Nichols' windowed minimum: the best, second best
// and third best samples of disjoint sub-windows, so the minimum over a
// sliding window is tracked in O(1) space and time.
type minFilter struct {
	s [3]minSample
}

func (m *minFilter) reset(t time.Time, v time.Duration) {
	m.s = [3]minSample{{t, v}, {t, v}, {t, v}}
}

func (m *minFilter) get() time.Duration { return m.s[0].v }

// update takes in sample v at time t and returns the minimum over the
// window ending at t.
func (m *minFilter) update(t time.Time, v time.Duration, win time.Duration) time.Duration {
	val := minSample{t, v}
	if v <= m.s[0].v || t.Sub(m.s[2].t) > win {
		// A new minimum, or nothing left in the window.
		m.reset(t, v)
		return v
	}
	if v <= m.s[1].v {
		m.s[1], m.s[2] = val, val
	} else if v <= m.s[2].v {
		m.s[2] = val
	}
	dt := t.Sub(m.s[0].t)
	switch {
	case dt > win:
		// The best sample left the window: promote the others.
		m.s[0], m.s[1], m.s[2] = m.s[1], m.s[2], val
		if t.Sub(m.s[0].t) > win {
			m.s[0], m.s[1], m.s[2] = m.s[1], m.s[2], val
		}
	case m.s[1].t.Equal(m.s[0].t) && dt > win/4:
		// A quarter window passed with no second choice: take one.
		m.s[1], m.s[2] = val, val
	case m.s[2].t.Equal(m.s[1].t) && dt > win/2:
		// Half the window passed with no third choice: take one.
		m.s[2] = val
	}
	return m.s[0].v
}
