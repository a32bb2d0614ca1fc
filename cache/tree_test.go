package cache

import (
	"slices"
	"testing"
)

func toks(s string) []int32 {
	out := make([]int32, len(s))
	for i, c := range s {
		out[i] = int32(c)
	}
	return out
}

func TestTreeSharedPrefixCountsOnce(t *testing.T) {
	tr := NewTree(3, 100)
	tr.Set(0, toks("abcdef"), 1)
	tr.Set(1, toks("abcxyz"), 2)
	tr.Set(2, toks("abc"), 3)
	if tr.Size() != 9 || tr.Free() != 91 {
		t.Fatalf("Size %d Free %d, want 9 91", tr.Size(), tr.Free())
	}
	if tr.Leaves() != 2 {
		t.Fatalf("Leaves %d, want 2", tr.Leaves())
	}
	if got := tr.Exclusive(0); got != 3 {
		t.Fatalf("Exclusive(0) %d, want 3", got)
	}
	if got := tr.Exclusive(2); got != 0 {
		t.Fatalf("Exclusive(2) %d, want 0 (abc is shared)", got)
	}
	if freed := tr.Clear(2); freed != 0 || tr.Size() != 9 {
		t.Fatalf("Clear(2) freed %d, size %d", freed, tr.Size())
	}
	if freed := tr.Clear(0); freed != 3 || tr.Size() != 6 {
		t.Fatalf("Clear(0) freed %d, size %d", freed, tr.Size())
	}
	checkInvariants(t, tr)
}

func TestTreeMatchPrefersUnlockedThenRecent(t *testing.T) {
	tr := NewTree(3, 100)
	tr.Set(0, toks("hello world"), 10)
	tr.Set(1, toks("hello there"), 30)
	tr.Set(2, toks("hello wor"), 20)
	n, h := tr.Match(toks("hello wonder"))
	if n != 8 || h != 2 {
		t.Fatalf("Match = %d,%d, want 8,2 (most recent of 0 and 2)", n, h)
	}
	tr.Lock(2)
	if _, h := tr.Match(toks("hello wonder")); h != 0 {
		t.Fatalf("Match picked %d, want unlocked 0", h)
	}
	tr.Lock(0)
	if _, h := tr.Match(toks("hello wonder")); h != 2 {
		t.Fatalf("all locked: picked %d, want most recent 2", h)
	}
	if n, h := tr.Match(toks("xyz")); n != 0 || h != -1 {
		t.Fatalf("no match = %d,%d, want 0,-1", n, h)
	}
	if n, h := tr.Match(nil); n != 0 || h != -1 {
		t.Fatalf("empty query = %d,%d", n, h)
	}
	if n := tr.MatchLen(toks("hello world and more")); n != 11 {
		t.Fatalf("MatchLen %d, want 11", n)
	}
}

func TestTreeLocksNest(t *testing.T) {
	tr := NewTree(1, 10)
	tr.Set(0, toks("ab"), 1)
	tr.Lock(0)
	tr.Lock(0)
	tr.Unlock(0)
	if !tr.Locked(0) || tr.Victims(1) != nil {
		t.Fatal("handle unlocked after one of two Unlocks")
	}
	tr.Unlock(0)
	tr.Unlock(0) // extra Unlock is harmless
	if tr.Locked(0) || !slices.Equal(tr.Victims(1), []Handle{0}) {
		t.Fatal("handle still locked")
	}
}

func TestTreeVictimsLRUAndSharing(t *testing.T) {
	tr := NewTree(3, 100)
	tr.Set(0, toks("sharedAAAA"), 1)
	tr.Set(1, toks("sharedBB"), 2)
	tr.Set(2, toks("zz"), 3)
	// Clearing 0 frees 4, then 1 frees 2 + the 6 shared cells.
	if got := tr.Victims(4); !slices.Equal(got, []Handle{0}) {
		t.Fatalf("Victims(4) = %v", got)
	}
	if got := tr.Victims(5); !slices.Equal(got, []Handle{0, 1}) {
		t.Fatalf("Victims(5) = %v", got)
	}
	if got := tr.Victims(12); !slices.Equal(got, []Handle{0, 1}) {
		t.Fatalf("Victims(12) = %v", got)
	}
	if got := tr.Victims(13); !slices.Equal(got, []Handle{0, 1, 2}) {
		t.Fatalf("Victims(13) = %v", got)
	}
	if got := tr.Victims(21); got != nil {
		t.Fatalf("Victims(21) = %v, want nil (impossible)", got)
	}
	if got := tr.Victims(0); got != nil {
		t.Fatalf("Victims(0) = %v, want nil", got)
	}
	tr.Touch(0, 9)
	if got := tr.Victims(1); !slices.Equal(got, []Handle{1}) {
		t.Fatalf("after Touch: Victims(1) = %v", got)
	}
	if tr.Size() != 14 {
		t.Fatalf("Victims modified the tree: size %d", tr.Size())
	}
}

func TestTreeAppendTruncateEdges(t *testing.T) {
	tr := NewTree(2, 100)
	tr.Append(0, toks("abc")...)
	tr.Append(0, toks("def")...) // own leaf: in place
	tr.Set(1, toks("abcdef"), 1)
	tr.Append(1, toks("g")...) // shares 0's leaf: must branch
	tr.Append(0, toks("h")...)
	if tr.Size() != 8 || tr.Leaves() != 2 {
		t.Fatalf("Size %d Leaves %d, want 8 2", tr.Size(), tr.Leaves())
	}
	checkInvariants(t, tr)
	tr.Truncate(1, 2) // mid-edge: splits
	checkInvariants(t, tr)
	if !slices.Equal(tr.Seq(1), toks("ab")) || tr.Size() != 7 {
		t.Fatalf("after Truncate: %q size %d", string(rune(tr.Seq(1)[0])), tr.Size())
	}
	tr.Truncate(1, 5) // longer than held: no-op
	if tr.Len(1) != 2 {
		t.Fatalf("Truncate beyond length changed it")
	}
	tr.Append(1, toks("cdefh")...) // follows 0's path exactly
	if tr.Size() != 7 || tr.Leaves() != 1 {
		t.Fatalf("Size %d Leaves %d, want 7 1", tr.Size(), tr.Leaves())
	}
	checkInvariants(t, tr)
	tr.Set(0, nil, 2)
	tr.Set(1, nil, 2)
	if tr.Size() != 0 || tr.Leaves() != 0 || len(tr.root.children) != 0 {
		t.Fatalf("not empty: size %d", tr.Size())
	}
}

func TestTreeSeqIsACopy(t *testing.T) {
	tr := NewTree(1, 10)
	in := toks("abc")
	tr.Set(0, in, 1)
	in[0] = 'z'
	out := tr.Seq(0)
	out[1] = 'z'
	if !slices.Equal(tr.Seq(0), toks("abc")) {
		t.Fatalf("tree aliased caller memory: %v", tr.Seq(0))
	}
}

func TestTreeWalk(t *testing.T) {
	tr := NewTree(4, 100)
	tr.Set(0, toks("abc"), 1)
	tr.Set(1, toks("abc"), 1)
	tr.Set(2, toks("ab"), 1)
	tr.Set(3, toks("x"), 1)
	got := map[string][]Handle{}
	tr.Walk(func(seq []int32, hs []Handle) {
		s := ""
		for _, c := range seq {
			s += string(rune(c))
		}
		got[s] = slices.Clone(hs)
	})
	if len(got) != 2 || !slices.Equal(got["abc"], []Handle{0, 1}) || !slices.Equal(got["x"], []Handle{3}) {
		t.Fatalf("Walk = %v", got)
	}
}

func TestNewTreeRejectsBadArguments(t *testing.T) {
	for _, c := range []struct{ slots, capacity int }{{0, 1}, {-1, 1}, {1, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewTree(%d, %d) did not panic", c.slots, c.capacity)
				}
			}()
			NewTree(c.slots, c.capacity)
		}()
	}
}
