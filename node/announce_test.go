package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
)

// fakeHolder is a CacheHolder and StatsSource over a tree.
type fakeHolder struct {
	mu    sync.Mutex
	tree  *cache.Tree
	stats infer.Stats
}

func (f *fakeHolder) WithCache(fn func(*cache.Tree)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.tree)
}

func (f *fakeHolder) Stats() infer.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeHolder) set(fn func(*fakeHolder)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// recorder is an Announcer that remembers what it was given.
type recorder struct {
	mu      sync.Mutex
	digests []*cache.Digest
	loads   []Load
	fail    error
}

func (r *recorder) PublishDigest(d *cache.Digest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.digests = append(r.digests, d)
	return r.fail
}

func (r *recorder) PublishLoad(l Load) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads = append(r.loads, l)
	return r.fail
}

func (r *recorder) snapshot() ([]*cache.Digest, []Load) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*cache.Digest(nil), r.digests...), append([]Load(nil), r.loads...)
}

func newAnnounceT(t *testing.T, every int) (*Announce, *fakeHolder, *recorder, *Speeds) {
	t.Helper()
	h := &fakeHolder{tree: cache.NewTree(4, 1<<14), stats: infer.Stats{Slots: 4}}
	src, err := cache.NewSource(cache.SourceConfig{Peer: "A", Model: "m", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	sp := NewSpeeds(0, 0, 0)
	a, err := NewAnnounce(AnnounceConfig{Cache: h, Stats: h, Source: src, Publish: rec, Speeds: sp,
		Policy: DefaultPolicy(), SnapshotEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	return a, h, rec, sp
}

func TestAnnounceRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, h, rec, sp := newAnnounceT(t, 5)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		synctest.Wait()
		// At once: a snapshot (empty cache) and a load.
		ds, ls := rec.snapshot()
		if len(ds) != 1 || ds[0].Kind != cache.KindSnapshot || len(ls) != 1 {
			t.Fatalf("start: %d digests, %d loads", len(ds), len(ls))
		}
		// The cache changes: the next interval sends a delta.
		h.set(func(f *fakeHolder) {
			f.tree.Set(0, prompt(1, 64), 1)
			f.stats.Queued = 4 // at the threshold: push-back
		})
		sp.Observe(&infer.Result{PromptTokens: 100, PrefillDuration: time.Second, GeneratedTokens: 11, DecodeDuration: time.Second})
		time.Sleep(time.Second)
		synctest.Wait()
		ds, ls = rec.snapshot()
		if len(ds) != 2 || ds[1].Kind != cache.KindDelta || len(ds[1].Added) != 4 {
			t.Fatalf("after change: %+v", ds)
		}
		if l := ls[1]; !l.PushBack || l.QueueDepth != 4 || l.PrefillTokPerSec != 100 || l.DecodeTokPerSec != 10 || l.Seq != ls[0].Seq+1 {
			t.Fatalf("load %+v after %+v", l, ls[0])
		}
		// No change: no digest until the 6th step, a snapshot.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if ds, _ = rec.snapshot(); len(ds) != 2 {
			t.Fatalf("quiet cache published %d digests", len(ds))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ds, ls = rec.snapshot()
		if len(ds) != 3 || ds[2].Kind != cache.KindSnapshot || len(ds[2].Hashes) != 4 || len(ls) != 6 {
			t.Fatalf("periodic snapshot: %d digests, %d loads", len(ds), len(ls))
		}
		// Snapshot pulls see the same state.
		if s := a.Snapshot(); len(s.Hashes) != 4 || s.Seq != ds[2].Seq {
			t.Fatalf("pulled %+v", s)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v", err)
		}
	})
}

func TestAnnounceFeedsAMesh(t *testing.T) {
	a, h, rec, _ := newAnnounceT(t, 10)
	m := newMeshT(t, nil)
	h.set(func(f *fakeHolder) { f.tree.Set(0, prompt(5, 160), 1) })
	for range 3 {
		if err := a.Step(); err != nil {
			t.Fatal(err)
		}
		h.set(func(f *fakeHolder) { f.tree.Append(0, prompt(6, 16)...) })
	}
	ds, ls := rec.snapshot()
	for _, d := range ds {
		if _, err := m.ApplyDigest("A", d, t0); err != nil {
			t.Fatal(err)
		}
	}
	m.ApplyLoad("A", ls[len(ls)-1], t0)
	q := append(append(prompt(5, 160), prompt(6, 16)...), prompt(6, 16)...)
	v := m.View(append(q, prompt(6, 16)...), LocalView{}, t0) // the last append was never published
	if v.Peers[0].EstimatedCached != 192 || v.Peers[0].Slots != 4 {
		t.Fatalf("mesh sees %+v", v.Peers[0])
	}
}

func TestAnnounceErrorsAreReported(t *testing.T) {
	a, _, rec, _ := newAnnounceT(t, 1)
	rec.fail = errors.New("topic closed")
	if err := a.Step(); err == nil {
		t.Fatal("publish error swallowed")
	}
}

// manualTicker is a Ticker driven by the test.
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

func TestAnnounceInjectedTicker(t *testing.T) {
	h := &fakeHolder{tree: cache.NewTree(4, 1<<14), stats: infer.Stats{Slots: 4}}
	src, _ := cache.NewSource(cache.SourceConfig{Peer: "A", Model: "m", Epoch: 1})
	rec := &recorder{}
	tick := manualTicker{c: make(chan time.Time)}
	a, err := NewAnnounce(AnnounceConfig{Cache: h, Stats: h, Source: src, Publish: rec,
		NewTicker: func(time.Duration) Ticker { return tick }, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	tick.c <- t0 // the first step ran before the loop waited for this tick
	tick.c <- t0 // so this one returns after the second step
	cancel()
	<-done
	if _, ls := rec.snapshot(); len(ls) < 2 || ls[0].Seq != uint64(t0.UnixNano())+1 {
		t.Fatalf("loads %+v", ls)
	}
}

func TestSpeeds(t *testing.T) {
	s := NewSpeeds(0.5, 0, 0)
	s.Observe(&infer.Result{PromptTokens: 10, PrefillDuration: time.Second}) // too small
	if pf, _ := s.Get(); pf != 0 {
		t.Fatalf("small sample counted: %v", pf)
	}
	s.Observe(&infer.Result{PromptTokens: 100, PrefillDuration: time.Second})
	s.Observe(&infer.Result{PromptTokens: 300, PrefillDuration: time.Second})
	if pf, _ := s.Get(); pf != 200 {
		t.Fatalf("ewma = %v, want 200", pf)
	}
}
