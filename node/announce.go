package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
)

// Announcer publishes this peer's digests and loads to the mesh; the p2p
// layer implements it over the model's GossipSub topic. Its methods must be
// safe for concurrent use and should not block for long (they run on the
// announce loop).
type Announcer interface {
	PublishDigest(d *cache.Digest) error
	PublishLoad(l Load) error
}

// CacheHolder gives access to the local engine's radix tree: WithCache runs
// fn with the tree under the engine's lock (fn must not keep the tree).
type CacheHolder interface {
	WithCache(fn func(*cache.Tree))
}

// StatsSource reports the local engine's load (an infer.Engine is one).
type StatsSource interface {
	Stats() infer.Stats
}

// Ticker is the announce loop's clock; NewTicker returns time.Ticker's.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// AnnounceConfig configures an Announce loop.
type AnnounceConfig struct {
	// Cache, Stats and Source: the engine's tree, its load, and the digest
	// source over the tree (required). The loop owns Source from now on.
	Cache  CacheHolder
	Stats  StatsSource
	Source *cache.Source
	// Publish sends what the loop computes (required).
	Publish Announcer
	// Speeds is the local speed meter (share the Router's); nil announces
	// no speeds.
	Speeds *Speeds
	// Policy supplies BusyQueueThreshold: push-back is announced at and
	// above it.
	Policy Policy
	// Interval between announcements; 0 means 1 s (so a peer's load is at
	// most about a second old, well inside Policy.LoadTTL).
	Interval time.Duration
	// SnapshotEvery sends a full snapshot instead of the delta every so
	// many intervals (and at the first); 0 means 10, so a replica that
	// missed deltas without noticing heals within 10 intervals, and a quiet
	// peer's estimate age stays within Policy.EstimateGrace.
	SnapshotEvery int
	// NewTicker makes the loop's ticker; nil uses time.NewTicker.
	NewTicker func(time.Duration) Ticker
	// Now seeds Load.Seq; nil means time.Now.
	Now func() time.Time
	// Logger receives publish errors; nil discards.
	Logger *slog.Logger
}

// Announce is the background loop that, every interval, computes the local
// digest delta and load and publishes them, and serves snapshot pulls.
//
// Concurrency: Run is the loop (one goroutine, started by the caller and
// stopped with its ctx); Step, Snapshot and Run may be called from any
// goroutines: one mutex serializes their use of the Source.
type Announce struct {
	cfg AnnounceConfig

	mu    sync.Mutex
	steps int
	seq   uint64
}

// NewAnnounce returns an announce loop; it does not start it.
func NewAnnounce(cfg AnnounceConfig) (*Announce, error) {
	if cfg.Cache == nil || cfg.Stats == nil || cfg.Source == nil || cfg.Publish == nil {
		return nil, fmt.Errorf("node: AnnounceConfig needs Cache, Stats, Source and Publish")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.SnapshotEvery <= 0 {
		cfg.SnapshotEvery = 10
	}
	if cfg.NewTicker == nil {
		cfg.NewTicker = NewStdTicker
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Announce{cfg: cfg, seq: uint64(cfg.Now().UnixNano())}, nil
}

// NewStdTicker is a Ticker on time.NewTicker (the default NewTicker).
func NewStdTicker(d time.Duration) Ticker { return stdTicker{time.NewTicker(d)} }

type stdTicker struct{ t *time.Ticker }

func (t stdTicker) C() <-chan time.Time { return t.t.C }
func (t stdTicker) Stop()               { t.t.Stop() }

// Run announces once at once, then every interval, until ctx is done; it
// returns ctx's error. Publish errors are logged, not fatal: the next
// interval tries again (and the next snapshot repairs lost deltas).
func (a *Announce) Run(ctx context.Context) error {
	t := a.cfg.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if err := a.Step(); err != nil {
			a.cfg.Logger.Warn("announce failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Step does one interval's work: publish the digest change (a snapshot at
// the first step and every SnapshotEvery steps; nothing when the cache did
// not change) and the load. It returns the first publish error.
func (a *Announce) Step() error {
	a.mu.Lock()
	a.steps++
	var d *cache.Digest
	var changed bool
	a.cfg.Cache.WithCache(func(t *cache.Tree) { d, changed = a.cfg.Source.Update(t) })
	if (a.steps-1)%a.cfg.SnapshotEvery == 0 {
		d, changed = a.cfg.Source.Snapshot(), true
	}
	a.seq++
	l := a.load(a.seq)
	a.mu.Unlock()

	var derr error
	if changed {
		derr = a.cfg.Publish.PublishDigest(d)
	}
	lerr := a.cfg.Publish.PublishLoad(l)
	if derr != nil {
		return fmt.Errorf("publish digest: %w", derr)
	}
	if lerr != nil {
		return fmt.Errorf("publish load: %w", lerr)
	}
	return nil
}

// load builds the current load announcement.
func (a *Announce) load(seq uint64) Load {
	st := a.cfg.Stats.Stats()
	l := Load{QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots, Seq: seq,
		PushBack: st.Queued >= a.cfg.Policy.BusyQueueThreshold && a.cfg.Policy.BusyQueueThreshold > 0}
	if a.cfg.Speeds != nil {
		l.PrefillTokPerSec, l.DecodeTokPerSec = a.cfg.Speeds.Get()
	}
	return l
}

// Snapshot returns the full digest of what the loop advertised last, for a
// peer's snapshot pull.
func (a *Announce) Snapshot() *cache.Digest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Source.Snapshot()
}
