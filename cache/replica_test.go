package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// sourcePeer is one simulated peer: its tree and its digest source.
type sourcePeer struct {
	id    string
	tree  *Tree
	model *model
	src   *Source
	epoch uint64
}

func newSourcePeer(t testing.TB, id string, b int, epoch uint64) *sourcePeer {
	src, err := NewSource(SourceConfig{Peer: id, Model: "m", BlockSize: b, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	return &sourcePeer{id: id, tree: NewTree(4, 1000), model: newModel(4), src: src, epoch: epoch}
}

func (p *sourcePeer) advertised() []Hash {
	d := p.src.Snapshot()
	return d.Hashes
}

// TestReplicaConvergesUnderLoss drives peers' caches at random and delivers
// their digests with loss, duplication and reordering to a Replica and a
// ClusterView. Whenever a replica reports the source's current (epoch, seq)
// its contents must equal the source's exactly; pulled and periodic
// snapshots must bring it there.
func TestReplicaConvergesUnderLoss(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			const b = 2
			peers := []*sourcePeer{newSourcePeer(t, "a", b, 1), newSourcePeer(t, "b", b, 1), newSourcePeer(t, "c", b, 1)}
			reps := map[string]*Replica{}
			for _, p := range peers {
				reps[p.id] = NewReplica(p.id, "m", b)
			}
			view := NewClusterView("m", b)
			type msg struct {
				d  *Digest
				at int
			}
			var queue []msg
			now := int64(1)
			deliver := func(d *Digest) {
				wire, err := d.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				// Each receiver decodes its own copy.
				d1, _ := Decode(wire)
				d2, _ := Decode(wire)
				if _, err := reps[d.Peer].Apply(d1, now); err != nil {
					t.Fatal(err)
				}
				if _, err := view.Apply(d2, now); err != nil {
					t.Fatal(err)
				}
			}
			loss, dup := r.Float64()*0.4, r.Float64()*0.3
			for step := 0; step < 300; step++ {
				now += int64(time.Millisecond)
				p := peers[r.IntN(len(peers))]
				switch x := r.IntN(20); {
				case x == 0: // restart: new epoch, empty cache
					np := newSourcePeer(t, p.id, b, p.epoch+1)
					*p = *np
				case x < 3:
					h := Handle(r.IntN(4))
					p.tree.Clear(h)
					p.model.seqs[h] = nil
				default:
					h := Handle(r.IntN(4))
					s := randSeq(r, p.model, 16)
					p.tree.Set(h, s, now)
					p.model.seqs[h] = s
				}
				if d, ok := p.src.Update(p.tree); ok {
					if r.Float64() >= loss {
						queue = append(queue, msg{d, step + r.IntN(4)})
						if r.Float64() < dup {
							queue = append(queue, msg{d, step + r.IntN(8)})
						}
					}
				}
				// Deliver what is due, in random order.
				r.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
				rest := queue[:0]
				for _, m := range queue {
					if m.at <= step {
						deliver(m.d)
					} else {
						rest = append(rest, m)
					}
				}
				queue = rest
				// Anti-entropy: pulls (sometimes late) and periodic snapshots.
				for _, q := range peers {
					if reps[q.id].NeedsSnapshot() && r.IntN(3) == 0 || r.IntN(25) == 0 {
						deliver(q.src.Snapshot())
					}
				}
				checkReplicas(t, peers, reps, view, r)
			}
			for _, q := range peers {
				deliver(q.src.Snapshot())
			}
			for _, q := range peers {
				e, s, _ := reps[q.id].State()
				if e != q.epoch || s != q.src.Seq() || reps[q.id].NeedsSnapshot() {
					t.Fatalf("peer %s: replica at (%d,%d) need=%v after snapshot, source at (%d,%d)",
						q.id, e, s, reps[q.id].NeedsSnapshot(), q.epoch, q.src.Seq())
				}
			}
			checkReplicas(t, peers, reps, view, r)
		})
	}
}

func checkReplicas(t *testing.T, peers []*sourcePeer, reps map[string]*Replica, view *ClusterView, r *rand.Rand) {
	t.Helper()
	for _, p := range peers {
		rep := reps[p.id]
		vrep := view.Replica(p.id)
		if vrep == nil {
			continue
		}
		if !slices.Equal(rep.Hashes(), vrep.Hashes()) {
			t.Fatalf("peer %s: view replica differs from standalone replica", p.id)
		}
		if e, s, ok := rep.State(); ok && e == p.epoch && s == p.src.Seq() {
			if got, want := rep.Hashes(), p.advertised(); !slices.Equal(got, want) {
				t.Fatalf("peer %s at (%d,%d): replica %v, source %v", p.id, e, s, got, want)
			}
		}
	}
	// The view's one walk agrees with each replica's own Match.
	var sc Scores
	for range 5 {
		p := peers[r.IntN(len(peers))]
		q := randSeq(r, p.model, 20)
		chain := view.Hasher().Chain(nil, q)
		view.ScoreChain(chain, 0, &sc)
		if len(sc.Peers) != view.Len() {
			t.Fatalf("%d estimates for %d peers", len(sc.Peers), view.Len())
		}
		for _, e := range sc.Peers {
			if want := view.Replica(e.Peer).Match(chain) * 2; e.Tokens != want {
				t.Fatalf("view estimate for %s: %d tokens, replica says %d", e.Peer, e.Tokens, want)
			}
		}
	}
}

func TestReplicaOrdering(t *testing.T) {
	mk := func(kind Kind, epoch, seq uint64, add ...Hash) *Digest {
		return &Digest{Kind: kind, Peer: "p", Model: "m", BlockSize: 4, Epoch: epoch, Seq: seq, Added: add}
	}
	r := NewReplica("p", "m", 4)
	if !r.NeedsSnapshot() {
		t.Fatal("new replica must need a snapshot")
	}
	steps := []struct {
		d    *Digest
		want Outcome
	}{
		{mk(KindDelta, 5, 3, 1), NewEpoch},  // cannot apply to nothing
		{mk(KindDelta, 5, 1, 1), Applied},   // first delta of an epoch applies to empty
		{mk(KindDelta, 5, 1, 1), Duplicate}, // again
		{mk(KindDelta, 5, 3, 3), Gap},       // 2 missing
		{mk(KindDelta, 5, 4, 4), Gap},
		{mk(KindDelta, 5, 2, 2), Applied}, // fills the gap: 3 and 4 apply too
		{mk(KindDelta, 4, 9, 9), Stale},   // older epoch
		{mk(KindDelta, 6, 2, 9), NewEpoch},
	}
	for i, s := range steps {
		got, err := r.Apply(s.d, int64(i+1))
		if err != nil || got != s.want {
			t.Fatalf("step %d: %v %v, want %v", i, got, err, s.want)
		}
		if i == 5 {
			if e, sq, _ := r.State(); e != 5 || sq != 4 || r.NeedsSnapshot() || r.Match([]Hash{1, 2, 3, 4}) != 4 {
				t.Fatalf("after gap fill: (%d,%d) need=%v match=%d", e, sq, r.NeedsSnapshot(), r.Match([]Hash{1, 2, 3, 4}))
			}
		}
	}
	if !r.NeedsSnapshot() {
		t.Fatal("a new epoch's delta must ask for a snapshot")
	}
	snap := &Digest{Kind: KindSnapshot, Peer: "p", Model: "m", BlockSize: 4, Epoch: 6, Seq: 2, Hashes: []Hash{7, 8}}
	if got, _ := r.Apply(snap, 20); got != Applied || r.NeedsSnapshot() || r.Has(1) || !r.Has(7) {
		t.Fatalf("snapshot: %v need=%v", got, r.NeedsSnapshot())
	}
	if got, _ := r.Apply(snap, 21); got != Duplicate {
		t.Fatalf("same snapshot again: %v", got)
	}
	if n, age := r.Estimate([]Hash{7, 8, 9}, 21+int64(time.Second)); n != 8 || age != time.Second {
		t.Fatalf("Estimate = %d, %v", n, age)
	}
	if r.Expired(21+int64(time.Second), 2*time.Second) || !r.Expired(21+int64(3*time.Second), 2*time.Second) {
		t.Fatal("expiry")
	}
	if _, err := r.Apply(&Digest{Kind: KindSnapshot, Peer: "other", Model: "m", BlockSize: 4, Epoch: 9}, 1); err == nil {
		t.Fatal("another peer's digest accepted")
	}
}

func TestReplicaBloomMode(t *testing.T) {
	src, _ := NewSource(SourceConfig{Peer: "p", Model: "m", BlockSize: 2, Epoch: 1, MaxBlocks: 4, Overflow: UseBloom})
	tr := NewTree(2, 100)
	tr.Set(0, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 1) // 6 blocks > cap 4
	src.Update(tr)
	snap := src.Snapshot()
	if snap.Filter == nil || snap.Held != 6 {
		t.Fatalf("expected a Bloom snapshot of 6 blocks: %+v", snap)
	}
	rep := NewReplica("p", "m", 2)
	rep.Apply(snap, 1)
	chain := src.Hasher().Chain(nil, tr.Seq(0))
	if rep.Match(chain) != 6 {
		t.Fatal("Bloom replica lost a block")
	}
	tr.Truncate(0, 6) // remove blocks 3..5: an exact delta
	d, _ := src.Update(tr)
	if d.Kind != KindDelta {
		t.Fatalf("want delta, got %v", d.Kind)
	}
	rep.Apply(d, 2)
	if got := rep.Match(chain); got != 3 {
		t.Fatalf("after removal Match = %d, want 3", got)
	}
}

func TestClusterViewExpireAndManyPeers(t *testing.T) {
	v := NewClusterViewLimits("m", 2, ViewLimits{MaxPeers: 200})
	h := v.Hasher()
	seq := []int32{1, 2, 3, 4, 5, 6}
	chain := h.Chain(nil, seq)
	for i := range 130 { // three words per row
		d := &Digest{Kind: KindSnapshot, Peer: fmt.Sprint("p", i), Model: "m", BlockSize: 2, Epoch: 1,
			Hashes: chain[:i%4]}
		if _, err := v.Apply(d, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	var sc Scores
	tr := NewTree(1, 10)
	tr.Set(0, seq[:5], 0)
	v.Score(seq, tr, 200, &sc)
	if sc.Local != 5 || len(sc.Peers) != 130 {
		t.Fatalf("Local %d, %d peers", sc.Local, len(sc.Peers))
	}
	for _, e := range sc.Peers {
		var i int
		fmt.Sscanf(e.Peer, "p%d", &i)
		if e.Tokens != 2*(i%4) {
			t.Fatalf("%s: %d tokens, want %d", e.Peer, e.Tokens, 2*(i%4))
		}
	}
	gone := v.Expire(100, 30)
	if len(gone) != 70 || v.Len() != 60 {
		t.Fatalf("expired %d, left %d", len(gone), v.Len())
	}
	for _, id := range gone {
		v.Remove(id) // already gone: harmless
	}
	// Freed bits are reused and start empty.
	v.Apply(&Digest{Kind: KindSnapshot, Peer: "new", Model: "m", BlockSize: 2, Epoch: 1}, 300)
	v.Score(seq, nil, 300, &sc)
	for _, e := range sc.Peers {
		if e.Peer == "new" && e.Tokens != 0 {
			t.Fatalf("reused bit kept old state: %d", e.Tokens)
		}
	}
	if _, err := v.Apply(&Digest{Kind: KindSnapshot, Peer: "x", Model: "other", BlockSize: 2, Epoch: 1}, 1); err == nil {
		t.Fatal("another model's digest accepted")
	}
}
