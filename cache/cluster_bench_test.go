package cache

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkClusterViewScore scores a 2,000-token prompt for 64 peers that
// advertise 100,000 blocks each (disjoint, the worst case for memory); peer
// i also holds the first i*2 blocks of the prompt, so the walk runs the
// whole chain. It reports the index memory per advertised block.
func BenchmarkClusterViewScore(b *testing.B) {
	const peers, blocks = 64, 100_000
	r := rand.New(rand.NewPCG(1, 2))
	prompt := randTokens(r, 2000)
	v := NewClusterViewLimits("m", DefaultBlockSize, ViewLimits{MaxBlocks: blocks})
	chain := v.Hasher().Chain(nil, prompt)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for p := range peers {
		hs := make([]Hash, blocks)
		for i := range hs {
			hs[i] = Hash(r.Uint64())
		}
		copy(hs, chain[:min(len(chain), 2*p)])
		d := &Digest{Kind: KindSnapshot, Peer: fmt.Sprint("peer", p), Model: "m", BlockSize: DefaultBlockSize, Epoch: 1, Hashes: hs}
		if _, err := v.Apply(d, 1); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perBlock := float64(after.HeapAlloc-before.HeapAlloc) / (peers * blocks)
	tr := NewTree(4, 8192)
	tr.Set(0, prompt[:1500], 0)
	var sc Scores
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v.Score(prompt, tr, 2, &sc)
	}
	b.ReportMetric(perBlock, "heap-B/block")
	if sc.Peers[0].Tokens+sc.Peers[63].Tokens == 0 {
		b.Fatal("no match")
	}
}

// BenchmarkHasherChain hashes a 2,000-token prompt.
func BenchmarkHasherChain(b *testing.B) {
	h := NewHasher("m", DefaultBlockSize)
	prompt := randTokens(rand.New(rand.NewPCG(1, 1)), 2000)
	var dst []Hash
	b.SetBytes(4 * 2000)
	for b.Loop() {
		dst = h.Chain(dst[:0], prompt)
	}
}

// BenchmarkSourceUpdate is one request's digest update on a peer with 16
// slots of 2,000-token sequences sharing 1,500-token prefixes.
func BenchmarkSourceUpdate(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	src, _ := NewSource(SourceConfig{Peer: "p", Model: "m", Epoch: 1})
	tr := NewTree(16, 1<<20)
	prefixes := [][]int32{randTokens(r, 1500), randTokens(r, 1500), randTokens(r, 1500)}
	seqs := make([][]int32, 64)
	for i := range seqs {
		seqs[i] = append(append([]int32{}, prefixes[i%3]...), randTokens(r, 500)...)
	}
	for h := range 16 {
		tr.Set(Handle(h), seqs[h], int64(h))
	}
	src.Update(tr)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tr.Set(Handle(i%16), seqs[i%64], int64(16+i))
		src.Update(tr)
	}
}
