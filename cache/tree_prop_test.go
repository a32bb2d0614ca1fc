package cache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// randSeq returns a random sequence over a tiny alphabet, often extending a
// prefix of an existing sequence, so that sequences share prefixes the way
// prompts of one subject do.
func randSeq(r *rand.Rand, m *model, maxLen int) []int32 {
	var s []int32
	if r.IntN(3) > 0 {
		base := m.seqs[r.IntN(len(m.seqs))]
		s = slices.Clone(base[:r.IntN(len(base)+1)])
	}
	for n := r.IntN(maxLen / 2); n > 0 && len(s) < maxLen; n-- {
		s = append(s, int32(r.IntN(3)))
	}
	return s
}

func TestTreeMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		slots := 1 + r.IntN(6)
		tr := NewTree(slots, 64)
		m := newModel(slots)
		now := int64(0)
		for op := 0; op < 400; op++ {
			h := Handle(r.IntN(slots))
			now += int64(r.IntN(3)) // ties happen
			switch r.IntN(9) {
			case 0, 1:
				s := randSeq(r, m, 24)
				tr.Set(h, s, now)
				m.seqs[h], m.used[h] = s, now
			case 2, 3:
				toks := randSeq(r, newModel(1), 8)
				tr.Append(h, toks...)
				m.seqs[h] = append(m.seqs[h], toks...)
			case 4:
				n := r.IntN(len(m.seqs[h]) + 2)
				tr.Truncate(h, n)
				if n < len(m.seqs[h]) {
					m.seqs[h] = m.seqs[h][:n]
				}
			case 5:
				want := m.size() - m.sizeWithout(map[int]bool{int(h): true})
				if got := tr.Clear(h); got != want {
					t.Fatalf("seed %d op %d: Clear freed %d, want %d", seed, op, got, want)
				}
				m.seqs[h] = nil
			case 6:
				if r.IntN(2) == 0 {
					tr.Lock(h)
				} else {
					tr.Unlock(h)
				}
				m.locked[h] = tr.Locked(h) // locks nest; the model follows the tree
			case 7:
				tr.Touch(h, now)
				m.used[h] = now
			case 8:
				need := r.IntN(tr.Size() + 4)
				got, want := tr.Victims(need), m.victims(need)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d op %d: Victims(%d) = %v, want %v", seed, op, need, got, want)
				}
			}
			// Matches of random queries, and of prefixes of held sequences.
			for range 3 {
				q := randSeq(r, m, 30)
				gn, gh := tr.Match(q)
				wn, wh := m.match(q)
				if gn != wn || gh != wh {
					t.Fatalf("seed %d op %d: Match(%v) = %d,%d, want %d,%d", seed, op, q, gn, gh, wn, wh)
				}
			}
			compareModel(t, tr, m)
		}
	}
}
