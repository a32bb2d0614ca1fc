package cache

import (
	"fmt"
	"slices"
)

// Handle names one KV slot of the engine (a llama.cpp sequence id).
// Valid handles of a Tree with n slots are 0 <= h < n; -1 means "none".
type Handle int

// Tree is the exact local prefix tree of an engine's KV cache: the union of
// the token sequences its slots hold, as a compact radix tree whose edges are
// labelled with token runs. A prefix shared by several slots is stored, and
// counted, once, so Size is the number of distinct KV cells in use when the
// engine's KV cache is unified.
//
// The tree has at most 2*slots+1 nodes: every leaf is the end of some slot's
// sequence and every inner node is a branch point or a slot's end. Memory is
// 4 bytes per distinct cached token in edge labels (plus append slack), 4
// bytes per token per slot for the slots' own copies (which make Seq, Len and
// Set's prefix comparison cheap), and about 100 bytes per node.
//
// Tree never evicts on its own: the caller asks Victims which slots to clear
// before it grows the cache, and Clears them. Free is negative when the
// caller has put more than Capacity tokens in.
//
// Tree is not safe for concurrent use: one goroutine (the engine's loop)
// owns it. Methods panic on a handle out of range, as on a slice index.
type Tree struct {
	root     *node
	slots    []slot
	capacity int
	size     int
}

// slot is what one handle holds.
type slot struct {
	seq   []int32 // the tokens, owned by the tree
	end   *node   // node whose label ends at len(seq); root when empty
	used  int64   // last Set or Touch time
	locks int
}

// node is one edge of the radix tree together with the node it leads to.
type node struct {
	parent   *node
	label    []int32 // tokens on the edge from parent; empty only at the root
	children []*node // distinct first tokens; at most slots of them, so a slice
	ref      int     // handles ending at this node or below it
	ends     int     // handles ending exactly here
	depth    int     // tokens from the root to the end of label
}

// NewTree returns an empty tree over slots handles and capacity KV cells.
func NewTree(slots, capacity int) *Tree {
	if slots <= 0 || capacity < 0 {
		panic(fmt.Sprintf("cache: NewTree(%d, %d): need slots > 0 and capacity >= 0", slots, capacity))
	}
	t := &Tree{root: &node{ref: slots, ends: slots}, slots: make([]slot, slots), capacity: capacity}
	for i := range t.slots {
		t.slots[i].end = t.root
	}
	return t
}

// Slots returns the number of handles.
func (t *Tree) Slots() int { return len(t.slots) }

// Capacity returns the number of KV cells the tree may use.
func (t *Tree) Capacity() int { return t.capacity }

// Size returns the number of distinct tokens (KV cells) that all handles
// hold together.
func (t *Tree) Size() int { return t.size }

// Free returns Capacity() - Size(); negative when the tree is over capacity.
func (t *Tree) Free() int { return t.capacity - t.size }

// Seq returns a copy of the tokens h holds.
func (t *Tree) Seq(h Handle) []int32 { return slices.Clone(t.slots[h].seq) }

// Len returns the number of tokens h holds.
func (t *Tree) Len(h Handle) int { return len(t.slots[h].seq) }

// LastUsed returns the time of h's last Set or Touch.
func (t *Tree) LastUsed(h Handle) int64 { return t.slots[h].used }

// Touch sets h's last-used time, which orders eviction (LRU). Times are the
// caller's clock (for example Unix nanoseconds); only their order matters.
func (t *Tree) Touch(h Handle, now int64) { t.slots[h].used = now }

// Lock pins h for a running request: Victims never returns a locked handle
// and Match prefers unlocked ones. Locks nest: h stays locked until every
// Lock has its Unlock.
func (t *Tree) Lock(h Handle) { t.slots[h].locks++ }

// Unlock undoes one Lock; unlocking an unlocked handle does nothing.
func (t *Tree) Unlock(h Handle) {
	if t.slots[h].locks > 0 {
		t.slots[h].locks--
	}
}

// Locked reports whether h is locked.
func (t *Tree) Locked(h Handle) bool { return t.slots[h].locks > 0 }

// Set makes h hold seq, replacing what it held, and touches h. It costs
// O(len(seq)) to compare, plus work proportional to the tokens that change:
// keeping a shared prefix is cheap. seq is copied.
func (t *Tree) Set(h Handle, seq []int32, now int64) {
	s := &t.slots[h]
	k := commonPrefix(s.seq, seq)
	t.Truncate(h, k)
	t.Append(h, seq[k:]...)
	s.used = now
}

// Append adds toks to the end of h's sequence (decoded or prefilled tokens).
// It costs O(len(toks)) amortised when h's tail is its own; when the new
// tokens follow a path other handles hold, they are shared, not copied.
func (t *Tree) Append(h Handle, toks ...int32) {
	if len(toks) == 0 {
		return
	}
	s := &t.slots[h]
	s.seq = append(s.seq, toks...)
	e := s.end
	if e != t.root && e.ref == 1 && len(e.children) == 0 {
		// h's own leaf: grow its label in place.
		e.label = append(e.label, toks...)
		e.depth += len(toks)
		t.size += len(toks)
		return
	}
	e.ends--
	cur := e
	for i := 0; i < len(toks); {
		c := cur.child(toks[i])
		if c == nil {
			leaf := &node{parent: cur, label: slices.Clone(toks[i:]), ref: 1, depth: cur.depth + len(toks) - i}
			cur.children = append(cur.children, leaf)
			t.size += len(leaf.label)
			cur = leaf
			break
		}
		k := commonPrefix(c.label, toks[i:])
		if k < len(c.label) {
			c = t.split(c, k)
		}
		c.ref++
		cur = c
		i += k
	}
	cur.ends++
	s.end = cur
	t.compact(e)
}

// Truncate keeps the first n tokens of h's sequence; n >= Len(h) does
// nothing. It costs O(branch points on h's path).
func (t *Tree) Truncate(h Handle, n int) {
	s := &t.slots[h]
	if n < 0 {
		panic(fmt.Sprintf("cache: Truncate(%d, %d): negative length", h, n))
	}
	if n >= len(s.seq) {
		return
	}
	e := s.end
	x := e
	for x != t.root && x.depth-len(x.label) >= n {
		x = x.parent
	}
	if x != t.root && n < x.depth {
		x = t.split(x, n-(x.depth-len(x.label)))
	}
	e.ends--
	x.ends++
	s.end = x
	s.seq = s.seq[:n]
	var top *node // parent of the highest node removed
	for y := e; y != x; y = y.parent {
		y.ref--
		if y.ref == 0 {
			t.size -= len(y.label)
			top = y.parent
			top.removeChild(y)
		}
	}
	if e.ref > 0 {
		t.compact(e)
	}
	if top != nil {
		t.compact(top)
	}
}

// Clear empties h and returns the number of cells freed: those no other
// handle shares.
func (t *Tree) Clear(h Handle) (freed int) {
	before := t.size
	t.Truncate(h, 0)
	return before - t.size
}

// Exclusive returns the number of cells Clear(h) would free.
func (t *Tree) Exclusive(h Handle) int {
	n := 0
	for e := t.slots[h].end; e != t.root && e.ref == 1; e = e.parent {
		n += len(e.label)
	}
	return n
}

// Match returns the length n of the longest prefix of seq that some handle
// holds, and one handle h holding it: an unlocked one if any, then the most
// recently used, then the lowest. It returns 0, -1 when no handle holds even
// seq[0]. It costs O(len(seq)) plus O(slots x branch points).
func (t *Tree) Match(seq []int32) (n int, h Handle) {
	n, last := t.walk(seq)
	if n == 0 {
		return 0, -1
	}
	h = -1
	for i := range t.slots {
		s := &t.slots[i]
		if len(s.seq) < n || !last.isAncestorOf(s.end) {
			continue
		}
		if h < 0 || t.better(Handle(i), h) {
			h = Handle(i)
		}
	}
	return n, h
}

// MatchLen is Match without choosing a handle: O(len(seq)).
func (t *Tree) MatchLen(seq []int32) int {
	n, _ := t.walk(seq)
	return n
}

// walk follows seq from the root and returns how many tokens matched and the
// node whose edge the match ended on (root when none).
func (t *Tree) walk(seq []int32) (n int, last *node) {
	cur := t.root
	last = t.root
	for n < len(seq) {
		c := cur.child(seq[n])
		if c == nil {
			break
		}
		k := commonPrefix(c.label, seq[n:])
		n += k
		last = c
		if k < len(c.label) {
			break
		}
		cur = c
	}
	return n, last
}

// better reports whether a is a better Match answer than b.
func (t *Tree) better(a, b Handle) bool {
	la, lb := t.Locked(a), t.Locked(b)
	if la != lb {
		return !la
	}
	return t.slots[a].used > t.slots[b].used
}

// Victims returns the unlocked, non-empty handles to clear, least recently
// used first, so that clearing them all frees at least need cells; it
// returns the shortest such LRU prefix, nil if need <= 0 or if even clearing
// every unlocked handle frees too little. It does not modify the tree.
func (t *Tree) Victims(need int) []Handle {
	if need <= 0 {
		return nil
	}
	order := t.LRU()
	dec := make(map[*node]int)
	freed := 0
	for i, h := range order {
		for e := t.slots[h].end; e != t.root; e = e.parent {
			dec[e]++
			if dec[e] == e.ref {
				freed += len(e.label)
			}
		}
		if freed >= need {
			return order[:i+1]
		}
	}
	return nil
}

// LRU returns the unlocked, non-empty handles, least recently used first
// (ties: lowest handle first).
func (t *Tree) LRU() []Handle {
	var order []Handle
	for i := range t.slots {
		if s := &t.slots[i]; s.locks == 0 && len(s.seq) > 0 {
			order = append(order, Handle(i))
		}
	}
	slices.SortStableFunc(order, func(a, b Handle) int {
		ua, ub := t.slots[a].used, t.slots[b].used
		switch {
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return 0
	})
	return order
}

// Leaves returns the number of distinct sequences held that are not a
// prefix of another held sequence.
func (t *Tree) Leaves() int {
	n := 0
	var visit func(*node)
	visit = func(x *node) {
		if len(x.children) == 0 && x != t.root {
			n++
		}
		for _, c := range x.children {
			visit(c)
		}
	}
	visit(t.root)
	return n
}

// Walk calls fn for each leaf sequence (see Leaves) with the handles that
// hold exactly that sequence, in depth-first order. seq and handles are
// reused between calls: fn must copy them to keep them. fn must not modify
// the tree.
func (t *Tree) Walk(fn func(seq []int32, handles []Handle)) {
	var path []int32
	var hs []Handle
	var visit func(*node)
	visit = func(x *node) {
		path = append(path, x.label...)
		if len(x.children) == 0 && x != t.root {
			hs = hs[:0]
			for i := range t.slots {
				if t.slots[i].end == x {
					hs = append(hs, Handle(i))
				}
			}
			fn(path, hs)
		}
		for _, c := range x.children {
			visit(c)
		}
		path = path[:len(path)-len(x.label)]
	}
	visit(t.root)
}

// split cuts c's edge after k tokens (0 < k < len(c.label)) and returns the
// new upper node, which takes c's place under c's parent.
func (t *Tree) split(c *node, k int) *node {
	u := &node{
		parent:   c.parent,
		label:    c.label[:k:k], // clipped: appending to u must not overwrite c
		children: []*node{c},
		ref:      c.ref,
		depth:    c.depth - len(c.label) + k,
	}
	c.parent.replaceChild(c, u)
	c.label = c.label[k:]
	c.parent = u
	return u
}

// compact merges x into its only child when no handle ends at x, keeping the
// tree a proper radix tree.
func (t *Tree) compact(x *node) {
	if x == t.root || x.ref == 0 || x.ends > 0 || len(x.children) != 1 {
		return
	}
	c := x.children[0]
	label := make([]int32, 0, len(x.label)+len(c.label))
	c.label = append(append(label, x.label...), c.label...)
	c.parent = x.parent
	x.parent.replaceChild(x, c)
}

func (x *node) child(tok int32) *node {
	for _, c := range x.children {
		if c.label[0] == tok {
			return c
		}
	}
	return nil
}

func (x *node) replaceChild(old, new *node) {
	for i, c := range x.children {
		if c == old {
			x.children[i] = new
			return
		}
	}
	panic("cache: tree corrupt: child not found")
}

func (x *node) removeChild(c *node) {
	i := slices.Index(x.children, c)
	if i < 0 {
		panic("cache: tree corrupt: child not found")
	}
	x.children = slices.Delete(x.children, i, i+1)
}

// isAncestorOf reports whether y is x or below x.
func (x *node) isAncestorOf(y *node) bool {
	for y != nil && y.depth > x.depth {
		y = y.parent
	}
	return y == x
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
