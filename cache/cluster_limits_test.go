package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
)

func TestClusterViewPeerLimit(t *testing.T) {
	v := NewClusterViewLimits("m", 2, ViewLimits{MaxPeers: 3, MaxBlocks: 4})
	if l := v.Limits(); l.MaxPeers != 3 || l.MaxBlocks != 4 {
		t.Fatalf("limits %+v", l)
	}
	if l := NewClusterView("m", 2).Limits(); l.MaxPeers != DefaultViewPeers || l.MaxBlocks != DefaultReplicaBlocks {
		t.Fatalf("default limits %+v", l)
	}
	apply := func(peer string, hs []Hash) error {
		_, err := v.Apply(&Digest{Kind: KindSnapshot, Peer: peer, Model: "m", BlockSize: 2, Epoch: 1, Seq: 1, Hashes: hs}, 1)
		return err
	}
	for i, p := range []string{"a", "b", "c"} {
		if err := apply(p, seqHashes(10*i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := apply("d", seqHashes(100, 1)); !errors.Is(err, ErrViewFull) {
		t.Fatalf("a fourth peer: %v, want ErrViewFull", err)
	}
	if v.Len() != 3 || v.Replica("d") != nil || v.Blocks() != 12 {
		t.Fatalf("%d peers, %d blocks after a refused peer", v.Len(), v.Blocks())
	}
	// A known peer is still fed; a removed one frees its place.
	if _, err := v.Apply(&Digest{Kind: KindDelta, Peer: "a", Model: "m", BlockSize: 2, Epoch: 1, Seq: 2, Added: []Hash{99}}, 2); err != nil {
		t.Fatal(err)
	}
	v.Remove("b")
	if err := apply("d", seqHashes(100, 1)); err != nil {
		t.Fatal(err)
	}
	if v.Len() != 3 || v.Blocks() != 4+4+1 {
		t.Fatalf("%d peers, %d blocks", v.Len(), v.Blocks())
	}
}

// TestMeasureViewWorstCase prints the heap a view at its default limits
// takes when every one of its peers advertises its block limit of distinct
// hashes (nothing shared: the worst case), and what 2,000 identities x
// 2,000 hashes cost a view with no peer limit (the attack before
// the limits):
//
//	MESHLLM_MEASURE=1 go test ./cache -run TestMeasureViewWorstCase -v -count=1
func TestMeasureViewWorstCase(t *testing.T) {
	if os.Getenv("MESHLLM_MEASURE") == "" {
		t.Skip("set MESHLLM_MEASURE=1 to measure the view's worst-case heap")
	}
	measure := func(limits ViewLimits, peers, blocks int) (mib float64, held, stored int) {
		r := rand.New(rand.NewPCG(5, 5))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := NewClusterViewLimits("m", DefaultBlockSize, limits)
		for p := range peers {
			hs := make([]Hash, blocks)
			for i := range hs {
				hs[i] = Hash(r.Uint64())
			}
			d := &Digest{Kind: KindSnapshot, Peer: fmt.Sprint("peer", p), Model: "m", BlockSize: DefaultBlockSize, Epoch: 1, Hashes: hs}
			if _, err := v.Apply(d, 1); err != nil && !errors.Is(err, ErrViewFull) {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		for _, p := range v.peers {
			if p != nil {
				stored += p.r.Len()
			}
		}
		runtime.KeepAlive(v)
		return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20), v.Len(), stored
	}
	def := ViewLimits{}.withDefaults()
	mib, n, stored := measure(def, def.MaxPeers, def.MaxBlocks)
	t.Logf("defaults (%d peers x %d blocks, all distinct): heap %.1f MiB, %d peers, %d blocks, %.0f B per (peer, block)",
		def.MaxPeers, def.MaxBlocks, mib, n, stored, mib*(1<<20)/float64(stored))
	mib, n, stored = measure(def, 2000, 2000)
	t.Logf("defaults, 2,000 identities x 2,000 hashes: heap %.1f MiB, %d peers, %d blocks", mib, n, stored)
	mib, n, stored = measure(ViewLimits{MaxPeers: 1 << 20, MaxBlocks: 1 << 20}, 2000, 2000)
	t.Logf("no peer limit, 2,000 identities x 2,000 hashes: heap %.1f MiB, %d peers, %d blocks, %.0f B per (peer, block)",
		mib, n, stored, mib*(1<<20)/float64(stored))
}
