package node

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// TrustConfig configures a Trust. DefaultTrustConfig returns the values
// meshllm ships with, one comment per field saying why.
type TrustConfig struct {
	// CacheSlackTokens and CacheMissFraction define a failed cache claim:
	// the peer reported reusing fewer cached tokens than the router's
	// estimate by more than max(CacheSlackTokens, CacheMissFraction x
	// estimate).
	CacheSlackTokens  int
	CacheMissFraction float64
	// TimeFactor and TimeSlack define a failed time claim: the request took
	// longer than TimeFactor x the expected completion time + TimeSlack
	// (the origin measures it, from the forward to the final result), or
	// timed out.
	TimeFactor float64
	TimeSlack  time.Duration
	// MissFactor multiplies a peer's trust on every failed claim.
	MissFactor float64
	// HitCredit is added to a peer's trust (up to 1) for every result whose
	// claims held.
	HitCredit float64
	// RecoveryHalfLife is how long a peer's distrust (1 - trust) takes to
	// halve without further evidence, so that an excluded peer, which gets
	// no requests to prove itself with, is tried again eventually.
	RecoveryHalfLife time.Duration
	// ExcludeBelow: a peer whose trust is below it is not a candidate at
	// all (Apply drops it from the view).
	ExcludeBelow float64
	// GossipBelow and GossipPenalty shape GossipScore: 0 at trust >=
	// GossipBelow, falling linearly to -GossipPenalty at trust 0.
	GossipBelow   float64
	GossipPenalty float64
	// MaxPeers bounds the peers remembered; beyond it the one updated
	// longest ago is forgotten (it starts over at full trust).
	MaxPeers int
	// Now is the clock of GossipScore (the other methods take the time);
	// nil means time.Now.
	Now func() time.Time
}

// DefaultTrustConfig returns the trust settings meshllm ships with.
func DefaultTrustConfig() TrustConfig {
	return TrustConfig{
		// Four blocks of the default 16 tokens, or half of the claim: an
		// honest peer can lose a prefix to eviction between its digest and
		// the request (a race the digest's age bounds), and the estimate is
		// block-granular; a liar claiming whole prompts misses by far more.
		CacheSlackTokens:  64,
		CacheMissFraction: 0.5,
		// 4x the expectation plus half a second: Decide's queue model is
		// coarse (queued requests are assumed to cost what this one does),
		// so only gross misses count.
		TimeFactor: 4,
		TimeSlack:  500 * time.Millisecond,
		// Halving: three failed claims in a row take a fresh peer from 1 to
		// 0.125, below ExcludeBelow.
		MissFactor: 0.5,
		// 0.05: recovering from one miss takes ten honest results; lying
		// costs more than honesty earns.
		HitCredit: 0.05,
		// 30 minutes: an excluded peer (0.125 after three misses) is a
		// candidate again after about 4 minutes (distrust 0.875 -> 0.8),
		// and one more failed claim excludes it again (0.1) for 5 more: a
		// liar gets about one forward per origin every 4-5 minutes, while
		// an honest peer that had a bad streak is back to full weight
		// within the hour.
		RecoveryHalfLife: 30 * time.Minute,
		ExcludeBelow:     0.2,
		// Gossip penalties start only at half trust: one eviction race
		// must not cost an honest peer its gossip. At 0.125 (three misses)
		// the score is -75, below the publish threshold (-50); after a
		// fourth miss (0.0625) it is -87.5, graylisted (-80).
		GossipBelow:   0.5,
		GossipPenalty: 100,
		// A mesh has tens of peers; 4096 bounds memory against peer-ID
		// churn (Sybil identities) at ~100 bytes each.
		MaxPeers: 4096,
	}
}

// Validate reports the first setting that cannot work.
func (c TrustConfig) Validate() error {
	switch {
	case c.CacheSlackTokens < 0 || !(c.CacheMissFraction >= 0 && c.CacheMissFraction <= 1):
		return fmt.Errorf("node: trust cache slack %d / fraction %v", c.CacheSlackTokens, c.CacheMissFraction)
	case !(c.TimeFactor >= 1) || c.TimeSlack < 0:
		return fmt.Errorf("node: trust time factor %v / slack %v", c.TimeFactor, c.TimeSlack)
	case !(c.MissFactor >= 0 && c.MissFactor < 1) || !(c.HitCredit >= 0 && c.HitCredit <= 1):
		return fmt.Errorf("node: trust miss factor %v / hit credit %v", c.MissFactor, c.HitCredit)
	case c.RecoveryHalfLife <= 0:
		return fmt.Errorf("node: trust recovery half-life %v", c.RecoveryHalfLife)
	case !(c.ExcludeBelow >= 0 && c.ExcludeBelow < 1) || !(c.GossipBelow >= 0 && c.GossipBelow <= 1) || c.GossipPenalty < 0:
		return fmt.Errorf("node: trust thresholds exclude %v gossip %v penalty %v", c.ExcludeBelow, c.GossipBelow, c.GossipPenalty)
	case c.MaxPeers <= 0:
		return fmt.Errorf("node: trust MaxPeers %d", c.MaxPeers)
	}
	return nil
}

// Claim is what the origin learns when a forward ends: what it was led to
// expect and what happened.
type Claim struct {
	// EstimatedCached is the cache estimate the decision used (after trust
	// scaling and age discount); RealizedCached what the peer reported.
	EstimatedCached, RealizedCached int
	// Expected is the decision's expected completion time on the peer;
	// Took how long the forward really took, as the origin measured it.
	Expected, Took time.Duration
	// TimedOut: the peer went quiet and the forward was cancelled.
	TimedOut bool
	// Failed: the forward failed otherwise, by the peer's fault: an error
	// or reset, a refusal of a request the origin's engine serves, or a
	// reply out of the request's bounds. Busy answers are not failures.
	Failed bool
	// Lied: a spot check found a reply the origin's model did not produce
	// (verified answers, verify.go). It costs all of the peer's trust, not
	// a MissFactor: it is proof of cheating, not a miss.
	Lied bool
}

// TrustStatus is one peer's trust as /v1/mesh reports it.
type TrustStatus struct {
	Peer  PeerID  `json:"peer"`
	Trust float64 `json:"trust"`
	// Claims counts the results judged, Failed those whose claims failed.
	Claims int64 `json:"claims"`
	Failed int64 `json:"failed"`
}

// Trust keeps, for every peer, how far its claims can be believed: a
// factor in [0, 1] that starts at 1, is multiplied by MissFactor whenever
// a forwarded request shows the peer's advertised cache or expected time
// to have been false, or fails by the peer's fault (Claim.Failed: every
// failure but busy), grows by HitCredit when they held, and recovers
// toward 1 with RecoveryHalfLife while there is no evidence.
//
// The router scales what a peer claims by its trust before deciding (see
// Apply): its estimated cached tokens and its advertised speeds, and it
// drops peers below ExcludeBelow. A peer that advertises every prefix (a
// Bloom filter with every bit set, say) and then serves from a cold cache,
// refuses or fails what it attracts therefore gets at most
// ceil(log(ExcludeBelow)/log(MissFactor)) = 3 forwards in a row from each
// origin (default settings) before it stops being a candidate; its
// GossipScore lowers its GossipSub score as well.
//
// Trust is safe for concurrent use: one mutex guards its state, and no
// method calls out while holding it.
type Trust struct {
	cfg TrustConfig

	mu    sync.Mutex
	peers map[PeerID]*trustPeer
}

type trustPeer struct {
	trust  float64   // at `at`
	at     time.Time // last update
	claims int64
	failed int64
}

// NewTrust returns a Trust in which every peer starts fully trusted.
func NewTrust(cfg TrustConfig) (*Trust, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Trust{cfg: cfg, peers: map[PeerID]*trustPeer{}}, nil
}

// Config returns the configuration.
func (t *Trust) Config() TrustConfig { return t.cfg }

// decayed returns p's trust at now: its distrust halved for every
// RecoveryHalfLife since its last update.
func (t *Trust) decayed(p *trustPeer, now time.Time) float64 {
	dt := now.Sub(p.at)
	if dt <= 0 || p.trust >= 1 {
		return p.trust
	}
	return 1 - (1-p.trust)*math.Exp2(-float64(dt)/float64(t.cfg.RecoveryHalfLife))
}

// Judge reports whether c's claims held under the configuration.
func (c TrustConfig) Judge(cl Claim) bool {
	if cl.TimedOut || cl.Failed || cl.Lied {
		return false
	}
	short := cl.EstimatedCached - cl.RealizedCached
	if short > c.CacheSlackTokens && float64(short) > c.CacheMissFraction*float64(cl.EstimatedCached) {
		return false
	}
	limit := time.Duration(c.TimeFactor*float64(cl.Expected)) + c.TimeSlack
	return cl.Took <= limit
}

// Observe judges one forward's result and updates peer's trust; it
// returns whether the claims held.
func (t *Trust) Observe(peer PeerID, c Claim, now time.Time) bool {
	honest := t.cfg.Judge(c)
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.peers[peer]
	if !ok {
		t.evict()
		p = &trustPeer{trust: 1, at: now}
		t.peers[peer] = p
	}
	v := t.decayed(p, now)
	switch {
	case honest:
		v = min(1, v+t.cfg.HitCredit)
	case c.Lied:
		v = 0
		p.failed++
	default:
		v *= t.cfg.MissFactor
		p.failed++
	}
	p.claims++
	p.trust, p.at = v, later(p.at, now)
	return honest
}

// evict forgets the least recently updated peer when the map is full.
// t.mu must be held.
func (t *Trust) evict() {
	if len(t.peers) < t.cfg.MaxPeers {
		return
	}
	var oldest PeerID
	var at time.Time
	first := true
	for id, p := range t.peers {
		if first || p.at.Before(at) {
			oldest, at, first = id, p.at, false
		}
	}
	delete(t.peers, oldest)
}

// Get returns peer's trust at now (1 for a peer never judged).
func (t *Trust) Get(peer PeerID, now time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.peers[peer]
	if !ok {
		return 1
	}
	return t.decayed(p, now)
}

// Apply scales what each peer of v claims by its trust at v.Now: its
// estimated cached tokens (rounded down) and its advertised speeds (a
// distrusted peer looks slower), and drops the peers whose trust is below
// ExcludeBelow. It reuses v.Peers' array and returns the adjusted view.
func (t *Trust) Apply(v View) View {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := v.Peers[:0]
	for _, pv := range v.Peers {
		p, ok := t.peers[pv.ID]
		if !ok {
			out = append(out, pv)
			continue
		}
		f := t.decayed(p, v.Now)
		if f < t.cfg.ExcludeBelow {
			continue
		}
		pv.EstimatedCached = int(float64(pv.EstimatedCached) * f)
		pv.PrefillTokPerSec *= f
		pv.DecodeTokPerSec *= f
		out = append(out, pv)
	}
	clear(v.Peers[len(out):])
	v.Peers = out
	return v
}

// GossipScore is peer's application-specific GossipSub score (P5) at the
// configured clock's time: 0 while its trust is at least GossipBelow, then
// falling linearly to -GossipPenalty at trust 0. The p2p layer's
// GossipOptions.AppScore takes it (through an adapter from peer.ID).
func (t *Trust) GossipScore(peer PeerID) float64 {
	f := t.Get(peer, t.cfg.Now())
	if f >= t.cfg.GossipBelow || t.cfg.GossipBelow == 0 {
		return 0
	}
	return -t.cfg.GossipPenalty * (t.cfg.GossipBelow - f) / t.cfg.GossipBelow
}

// Peers returns the trust of every peer judged so far, sorted by ID.
func (t *Trust) Peers(now time.Time) []TrustStatus {
	t.mu.Lock()
	out := make([]TrustStatus, 0, len(t.peers))
	for id, p := range t.peers {
		out = append(out, TrustStatus{Peer: id, Trust: t.decayed(p, now), Claims: p.claims, Failed: p.failed})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b TrustStatus) int { return compareIDs(a.Peer, b.Peer) })
	return out
}
