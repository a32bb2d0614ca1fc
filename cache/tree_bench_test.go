package cache

import (
	"math/rand/v2"
	"testing"
)

func randTokens(r *rand.Rand, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(r.IntN(32000))
	}
	return s
}

// BenchmarkTreeSet replaces a slot's 2,000-token sequence by another that
// shares its first 1,500 tokens (a new question after a shared 5-shot prefix).
func BenchmarkTreeSet(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	prefix := randTokens(r, 1500)
	seqs := make([][]int32, 64)
	for i := range seqs {
		seqs[i] = append(append([]int32{}, prefix...), randTokens(r, 500)...)
	}
	tr := NewTree(8, 1<<20)
	for h := range 7 {
		tr.Set(Handle(h+1), seqs[h], 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tr.Set(0, seqs[i%len(seqs)], int64(i))
	}
}

// BenchmarkTreeAppend decodes one token at a time into a slot.
func BenchmarkTreeAppend(b *testing.B) {
	tr := NewTree(4, 1<<30)
	tr.Set(1, make([]int32, 1000), 0)
	tr.Set(0, make([]int32, 1000), 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if tr.Len(0) > 1<<16 {
			tr.Truncate(0, 1000)
		}
		tr.Append(0, int32(i))
	}
}

// BenchmarkTreeMatch matches a 2,000-token prompt against 64 slots holding
// sequences of 8 subjects (shared 1,500-token prefixes).
func BenchmarkTreeMatch(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	prefixes := make([][]int32, 8)
	for i := range prefixes {
		prefixes[i] = randTokens(r, 1500)
	}
	tr := NewTree(64, 1<<20)
	for h := range 64 {
		tr.Set(Handle(h), append(append([]int32{}, prefixes[h%8]...), randTokens(r, 500)...), int64(h))
	}
	q := append(append([]int32{}, prefixes[3]...), randTokens(r, 500)...)
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := tr.Match(q); n < 1500 {
			b.Fatal(n)
		}
	}
}
