package cache

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// model is the naive reference for Tree: each handle's sequence as a slice,
// everything else computed from scratch.
type model struct {
	seqs   [][]int32
	used   []int64
	locked []bool
}

func newModel(slots int) *model {
	return &model{seqs: make([][]int32, slots), used: make([]int64, slots), locked: make([]bool, slots)}
}

func key(s []int32) string {
	var b strings.Builder
	for _, t := range s {
		fmt.Fprintf(&b, "%d,", t)
	}
	return b.String()
}

// size counts distinct non-empty prefixes of all sequences.
func (m *model) size() int {
	set := map[string]bool{}
	for _, s := range m.seqs {
		for i := 1; i <= len(s); i++ {
			set[key(s[:i])] = true
		}
	}
	return len(set)
}

func (m *model) sizeWithout(skip map[int]bool) int {
	set := map[string]bool{}
	for h, s := range m.seqs {
		if skip[h] {
			continue
		}
		for i := 1; i <= len(s); i++ {
			set[key(s[:i])] = true
		}
	}
	return len(set)
}

// leaves returns the distinct non-empty sequences that are no prefix of
// another, each with the handles holding it.
func (m *model) leaves() map[string][]Handle {
	out := map[string][]Handle{}
	for h, s := range m.seqs {
		if len(s) == 0 {
			continue
		}
		leaf := true
		for _, o := range m.seqs {
			if len(o) > len(s) && commonPrefix(o, s) == len(s) {
				leaf = false
			}
		}
		if leaf {
			out[key(s)] = append(out[key(s)], Handle(h))
		}
	}
	return out
}

func (m *model) match(q []int32) (int, Handle) {
	n := 0
	for _, s := range m.seqs {
		n = max(n, commonPrefix(s, q))
	}
	if n == 0 {
		return 0, -1
	}
	best := Handle(-1)
	for h, s := range m.seqs {
		if commonPrefix(s, q) < n {
			continue
		}
		if best < 0 {
			best = Handle(h)
			continue
		}
		b := int(best)
		if m.locked[b] != m.locked[h] {
			if !m.locked[h] {
				best = Handle(h)
			}
			continue
		}
		if m.used[h] > m.used[b] {
			best = Handle(h)
		}
	}
	return n, best
}

func (m *model) victims(need int) []Handle {
	if need <= 0 {
		return nil
	}
	var order []Handle
	for h := range m.seqs {
		if !m.locked[h] && len(m.seqs[h]) > 0 {
			order = append(order, Handle(h))
		}
	}
	slices.SortStableFunc(order, func(a, b Handle) int {
		switch {
		case m.used[a] < m.used[b]:
			return -1
		case m.used[a] > m.used[b]:
			return 1
		}
		return 0
	})
	before := m.size()
	skip := map[int]bool{}
	for i, h := range order {
		skip[int(h)] = true
		if before-m.sizeWithout(skip) >= need {
			return order[:i+1]
		}
	}
	return nil
}

// checkInvariants verifies the tree's internal structure.
func checkInvariants(t testing.TB, tr *Tree) {
	t.Helper()
	size := 0
	var visit func(x *node) (refs int)
	visit = func(x *node) int {
		if x != tr.root {
			if len(x.label) == 0 {
				t.Fatalf("empty label below root")
			}
			if x.depth != x.parent.depth+len(x.label) {
				t.Fatalf("depth %d, parent %d, label %d", x.depth, x.parent.depth, len(x.label))
			}
			if x.ends == 0 && len(x.children) == 1 {
				t.Fatalf("uncompacted node at depth %d", x.depth)
			}
			if x.ref == 0 {
				t.Fatalf("dead node in tree")
			}
			size += len(x.label)
		}
		firsts := map[int32]bool{}
		refs := x.ends
		for _, c := range x.children {
			if c.parent != x {
				t.Fatalf("bad parent pointer")
			}
			if firsts[c.label[0]] {
				t.Fatalf("two children start with %d", c.label[0])
			}
			firsts[c.label[0]] = true
			refs += visit(c)
		}
		if refs != x.ref {
			t.Fatalf("node at depth %d: ref %d, counted %d", x.depth, x.ref, refs)
		}
		ends := 0
		for i := range tr.slots {
			if tr.slots[i].end == x {
				ends++
			}
		}
		if ends != x.ends {
			t.Fatalf("node at depth %d: ends %d, counted %d", x.depth, x.ends, ends)
		}
		return refs
	}
	visit(tr.root)
	if size != tr.size {
		t.Fatalf("size %d, labels sum to %d", tr.size, size)
	}
	for h := range tr.slots {
		s := &tr.slots[h]
		if s.end.depth != len(s.seq) {
			t.Fatalf("handle %d: len %d, end depth %d", h, len(s.seq), s.end.depth)
		}
		// The path spells seq.
		var path []int32
		for x := s.end; x != tr.root; x = x.parent {
			path = append(slices.Clone(x.label), path...)
		}
		if !slices.Equal(path, s.seq) {
			t.Fatalf("handle %d: path %v, seq %v", h, path, s.seq)
		}
	}
}

// compareModel checks every observable of tr against m.
func compareModel(t testing.TB, tr *Tree, m *model) {
	t.Helper()
	checkInvariants(t, tr)
	if got, want := tr.Size(), m.size(); got != want {
		t.Fatalf("Size %d, want %d", got, want)
	}
	if tr.Free() != tr.Capacity()-tr.Size() {
		t.Fatalf("Free %d", tr.Free())
	}
	for h := range m.seqs {
		if got := tr.Seq(Handle(h)); !slices.Equal(got, m.seqs[h]) {
			t.Fatalf("Seq(%d) = %v, want %v", h, got, m.seqs[h])
		}
		if tr.Len(Handle(h)) != len(m.seqs[h]) {
			t.Fatalf("Len(%d)", h)
		}
		want := m.size() - m.sizeWithout(map[int]bool{h: true})
		if got := tr.Exclusive(Handle(h)); got != want {
			t.Fatalf("Exclusive(%d) = %d, want %d", h, got, want)
		}
	}
	leaves := m.leaves()
	if tr.Leaves() != len(leaves) {
		t.Fatalf("Leaves %d, want %d", tr.Leaves(), len(leaves))
	}
	seen := 0
	tr.Walk(func(seq []int32, hs []Handle) {
		want, ok := leaves[key(seq)]
		if !ok {
			t.Fatalf("Walk: unexpected leaf %v", seq)
		}
		if !slices.Equal(hs, want) {
			t.Fatalf("Walk: leaf %v handles %v, want %v", seq, hs, want)
		}
		seen++
	})
	if seen != len(leaves) {
		t.Fatalf("Walk saw %d leaves, want %d", seen, len(leaves))
	}
}
