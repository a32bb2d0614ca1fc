package cache

import (
	"testing"
)

func seqHashes(from, n int) []Hash {
	hs := make([]Hash, n)
	for i := range hs {
		hs[i] = Hash(from + i)
	}
	return hs
}

// TestReplicaBlockLimit: whatever a peer sends, a replica holds at most its
// block limit — in a snapshot, in deltas, in a Bloom filter and the
// removals tracked over it, and in pending deltas — and the limit only ever
// loses matches.
func TestReplicaBlockLimit(t *testing.T) {
	const limit = 100
	snap := func(seq uint64, hs []Hash) *Digest {
		return &Digest{Kind: KindSnapshot, Peer: "p", Model: "m", BlockSize: 2, Epoch: 1, Seq: seq, Hashes: hs, Held: len(hs)}
	}
	delta := func(seq uint64, added, removed []Hash) *Digest {
		return &Digest{Kind: KindDelta, Peer: "p", Model: "m", BlockSize: 2, Epoch: 1, Seq: seq, Added: added, Removed: removed}
	}

	t.Run("snapshot", func(t *testing.T) {
		r := NewReplicaLimit("p", "m", 2, limit)
		if _, err := r.Apply(snap(1, seqHashes(1, 10*limit)), 1); err != nil {
			t.Fatal(err)
		}
		if r.Len() != limit || !r.Truncated() || r.Held() != 10*limit {
			t.Fatalf("len %d truncated %v held %d, want %d true %d", r.Len(), r.Truncated(), r.Held(), limit, 10*limit)
		}
		for _, h := range r.Hashes() {
			if h > Hash(10*limit) || h < 1 {
				t.Fatalf("hash %d was never advertised", h)
			}
		}
		// A snapshot within the limit clears the flag.
		r.Apply(snap(2, seqHashes(1, limit)), 2)
		if r.Len() != limit || r.Truncated() {
			t.Fatalf("len %d truncated %v after a snapshot at the limit", r.Len(), r.Truncated())
		}
	})

	t.Run("deltas", func(t *testing.T) {
		r := NewReplicaLimit("p", "m", 2, limit)
		r.Apply(snap(1, seqHashes(1, limit-10)), 1)
		r.Apply(delta(2, seqHashes(1000, 50), nil), 2)
		if r.Len() != limit || !r.Truncated() {
			t.Fatalf("len %d truncated %v", r.Len(), r.Truncated())
		}
		// Removals first, then adds: room made in the same delta is used.
		r.Apply(delta(3, seqHashes(2000, 20), seqHashes(1, 20)), 3)
		if r.Len() != limit || !r.Has(2000) || r.Has(1) {
			t.Fatalf("len %d, has new %v, has removed %v", r.Len(), r.Has(2000), r.Has(1))
		}
	})

	t.Run("pending", func(t *testing.T) {
		r := NewReplicaLimit("p", "m", 2, limit)
		r.Apply(snap(1, nil), 1)
		// Out of order: seq 3 and on wait for 2. Each carries 30 hashes:
		// three fit in the pending budget, the fourth is not kept.
		for s := uint64(3); s <= 6; s++ {
			if out, _ := r.Apply(delta(s, seqHashes(int(s)*100, 30), nil), 2); out != Gap {
				t.Fatalf("seq %d: %v, want gap", s, out)
			}
		}
		if r.pendingN != 90 || len(r.pending) != 3 {
			t.Fatalf("pending %d deltas, %d hashes; want 3, 90", len(r.pending), r.pendingN)
		}
		// The same delta again does not count twice.
		r.Apply(delta(4, seqHashes(400, 30), nil), 2)
		if r.pendingN != 90 {
			t.Fatalf("a re-sent pending delta counted twice: %d hashes", r.pendingN)
		}
		r.Apply(delta(2, nil, nil), 3)
		if _, seq, _ := r.State(); seq != 5 || !r.NeedsSnapshot() || r.pendingN != 0 {
			t.Fatalf("seq %d need %v pending %d; want 5 (6 was never kept), true, 0", seq, r.NeedsSnapshot(), r.pendingN)
		}
	})

	t.Run("bloom", func(t *testing.T) {
		r := NewReplicaLimit("p", "m", 2, limit)
		big := NewBloom(limit+1, 10)
		big.Add(7)
		d := &Digest{Kind: KindSnapshot, Peer: "p", Model: "m", BlockSize: 2, Epoch: 1, Seq: 1, Filter: big, Held: 10}
		r.Apply(d, 1)
		if r.Bloom() || r.Has(7) || !r.Truncated() {
			t.Fatalf("a filter over the limit was kept: bloom %v has %v", r.Bloom(), r.Has(7))
		}
		small := NewBloom(limit, 10)
		small.Add(7)
		d.Seq, d.Filter = 2, small
		r.Apply(d, 2)
		if !r.Bloom() || !r.Has(7) || r.Truncated() {
			t.Fatalf("a filter at the limit: bloom %v has %v truncated %v", r.Bloom(), r.Has(7), r.Truncated())
		}
		// Removals the filter cannot forget: past the limit, the filter
		// goes (matches are lost, never invented).
		r.Apply(delta(3, nil, seqHashes(1000, limit)), 3)
		if !r.Bloom() || !r.Has(7) {
			t.Fatal("filter dropped at the limit")
		}
		r.Apply(delta(4, nil, []Hash{5000}), 4)
		if r.Bloom() || r.Has(7) || !r.Truncated() || len(r.removed) != 0 {
			t.Fatalf("bloom %v has %v truncated %v removed %d", r.Bloom(), r.Has(7), r.Truncated(), len(r.removed))
		}
	})
}
