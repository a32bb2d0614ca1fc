package infer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// fakeKV models llama.cpp's unified KV cache: cells hold one token each and
// may belong to several sequences (after SeqCp); a sequence maps positions
// to cells. It is the ground truth that Slots' radix tree must equal.
type fakeKV struct {
	next  int
	cells map[int]int32       // cell id -> token
	seqs  map[int]map[int]int // seq -> position -> cell id
}

func newFakeKV() *fakeKV {
	return &fakeKV{cells: map[int]int32{}, seqs: map[int]map[int]int{}}
}

func (k *fakeKV) seq(s int) map[int]int {
	if k.seqs[s] == nil {
		k.seqs[s] = map[int]int{}
	}
	return k.seqs[s]
}

func (k *fakeKV) SeqRm(s, p0, p1 int) bool {
	for p := range k.seq(s) {
		if p >= p0 && (p1 < 0 || p < p1) {
			delete(k.seqs[s], p)
		}
	}
	k.gc()
	return true
}

func (k *fakeKV) SeqCp(src, dst, p0, p1 int) {
	for p, c := range k.seq(src) {
		if p >= p0 && (p1 < 0 || p < p1) {
			k.seq(dst)[p] = c
		}
	}
}

// write is what llama_decode does for one token of one sequence.
func (k *fakeKV) write(s, pos int, tok int32) {
	k.next++
	k.cells[k.next] = tok
	k.seq(s)[pos] = k.next
}

// gc frees cells no sequence uses.
func (k *fakeKV) gc() {
	used := map[int]bool{}
	for _, m := range k.seqs {
		for _, c := range m {
			used[c] = true
		}
	}
	for c := range k.cells {
		if !used[c] {
			delete(k.cells, c)
		}
	}
}

// tokens returns seq s as a token list; positions must be 0..n-1.
func (k *fakeKV) tokens(t *testing.T, s int) []int32 {
	m := k.seq(s)
	out := make([]int32, len(m))
	for p, c := range m {
		if p >= len(m) {
			t.Fatalf("seq %d has a hole: position %d of %d", s, p, len(m))
		}
		out[p] = k.cells[c]
	}
	return out
}

type active struct {
	slot   int
	prompt []int32
	pos    int
	gen    int
	maxGen int
}

// TestSlotsMatchKV drives Slots with random request sequences against the
// fake KV and checks after every step that the radix tree is exactly what
// the KV holds: the same sequence per slot, the same number of distinct
// cells, never more than capacity, and matches equal to a naive scan.
func TestSlotsMatchKV(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const nslots, capacity = 4, 400
		kv := newFakeKV()
		s := NewSlots(nslots, capacity, kv)
		prefixes := make([][]int32, 5)
		for i := range prefixes {
			prefixes[i] = randTokens(rng, 20+rng.IntN(60))
		}
		var running []*active
		now := int64(0)
		for step := 0; step < 600; step++ {
			now++
			switch r := rng.IntN(10); {
			case r < 3 && len(running) < nslots:
				prompt := slices.Concat(prefixes[rng.IntN(len(prefixes))], randTokens(rng, 1+rng.IntN(40)))
				if rng.IntN(4) == 0 && len(running) > 0 {
					// Extend a running request's prompt (a chat turn).
					a := running[rng.IntN(len(running))]
					prompt = slices.Concat(a.prompt, randTokens(rng, 5))
				}
				maxGen := 1 + rng.IntN(30)
				slot, cached, ok := s.Acquire(prompt, maxGen, now)
				if !ok {
					continue
				}
				if want := naiveMatch(kv, t, nslots, prompt); cached != min(want, len(prompt)-1) {
					t.Fatalf("seed %d step %d: cached %d, naive match %d", seed, step, cached, want)
				}
				if got := kv.tokens(t, slot); !slices.Equal(got, prompt[:cached]) {
					t.Fatalf("seed %d step %d: slot %d holds %v, want prompt[:%d]", seed, step, slot, got, cached)
				}
				running = append(running, &active{slot: slot, prompt: prompt, pos: cached, maxGen: maxGen})
			case r < 8 && len(running) > 0:
				// One decode step for a random running request.
				a := running[rng.IntN(len(running))]
				var tok int32
				if a.pos < len(a.prompt) {
					tok = a.prompt[a.pos]
				} else {
					tok = int32(rng.IntN(50))
					a.gen++
				}
				kv.write(a.slot, a.pos, tok)
				s.Append(a.slot, tok)
				a.pos++
			case len(running) > 0:
				i := rng.IntN(len(running))
				s.Release(running[i].slot, now)
				running = slices.Delete(running, i, i+1)
			}
			check(t, seed, step, s, kv, nslots, capacity)
		}
	}
}

func check(t *testing.T, seed uint64, step int, s *Slots, kv *fakeKV, nslots, capacity int) {
	t.Helper()
	for h := range nslots {
		if got, want := s.Seq(h), kv.tokens(t, h); !slices.Equal(got, want) {
			t.Fatalf("seed %d step %d: tree has slot %d = %v, KV holds %v", seed, step, h, got, want)
		}
	}
	if s.Tree().Size() != len(kv.cells) {
		t.Fatalf("seed %d step %d: tree size %d, KV cells in use %d", seed, step, s.Tree().Size(), len(kv.cells))
	}
	if len(kv.cells) > capacity {
		t.Fatalf("seed %d step %d: %d cells in use exceed capacity %d", seed, step, len(kv.cells), capacity)
	}
}

func naiveMatch(kv *fakeKV, t *testing.T, nslots int, prompt []int32) int {
	best := 0
	for h := range nslots {
		seq := kv.tokens(t, h)
		n := 0
		for n < len(seq) && n < len(prompt) && seq[n] == prompt[n] {
			n++
		}
		best = max(best, n)
	}
	return best
}

func randTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(50))
	}
	return out
}

// TestSlotsPreferCopyOverTruncate: a request diverging from a longer cached
// sequence copies the shared prefix into another slot instead of cutting
// the longer sequence.
func TestSlotsPreferCopyOverTruncate(t *testing.T) {
	kv := newFakeKV()
	s := NewSlots(2, 100, kv)
	long := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	slot, _, _ := s.Acquire(long, 0, 1)
	for i, tok := range long {
		kv.write(slot, i, tok)
		s.Append(slot, tok)
	}
	s.Release(slot, 2)
	other, cached, ok := s.Acquire([]int32{1, 2, 3, 4, 9, 9}, 0, 3)
	if !ok || other == slot || cached != 4 {
		t.Fatalf("got slot %d (first %d) cached %d ok %v", other, slot, cached, ok)
	}
	if !slices.Equal(s.Seq(slot), long) {
		t.Fatalf("long sequence was cut: %v", s.Seq(slot))
	}
	if s.Tree().Size() != len(long) {
		t.Fatalf("copied prefix should share cells: size %d", s.Tree().Size())
	}
}

// TestSlotsEvictLRU: when cells run out, the least recently used idle slot
// is cleared first.
func TestSlotsEvictLRU(t *testing.T) {
	kv := newFakeKV()
	s := NewSlots(3, 10, kv)
	fill := func(prompt []int32, now int64) int {
		slot, cached, ok := s.Acquire(prompt, 0, now)
		if !ok {
			t.Fatalf("acquire %v failed", prompt)
		}
		for i := cached; i < len(prompt); i++ {
			kv.write(slot, i, prompt[i])
			s.Append(slot, prompt[i])
		}
		s.Release(slot, now)
		return slot
	}
	a := fill([]int32{1, 1, 1, 1}, 1)
	b := fill([]int32{2, 2, 2, 2}, 2)
	c := fill([]int32{3, 3, 3, 3}, 3) // needs 4 cells: 2 free, so a (oldest) goes
	if s.Len(a) != 0 || s.Len(b) != 4 || s.Len(c) != 4 {
		t.Fatalf("after eviction: a=%d b=%d c=%d", s.Len(a), s.Len(b), s.Len(c))
	}
}
