package cache

import "slices"

// Block is one full block a Tree holds.
type Block struct {
	Hash  Hash
	Index int   // position in its chain: the block covers tokens [Index*B, (Index+1)*B)
	Used  int64 // latest LastUsed of the handles holding it
}

// Blocks appends to dst every distinct full block the tree holds, hashed
// with h, and returns it. Shared prefixes are hashed once: the cost is
// O(Size()) token hashing plus O(nodes x slots). A block's Used is never
// older than that of a block after it in the same chain, so sorting by Used
// (newest first), then Index, keeps every prefix of the order
// prefix-closed.
func (t *Tree) Blocks(h Hasher, dst []Block) []Block {
	// Newest use of the handles ending at each node.
	endUsed := make(map[*node]int64, len(t.slots))
	for i := range t.slots {
		s := &t.slots[i]
		if u, ok := endUsed[s.end]; !ok || s.used > u {
			endUsed[s.end] = s.used
		}
	}
	b := h.BlockSize()
	var visit func(x *node, prev uint64, pending []int32) int64
	visit = func(x *node, prev uint64, pending []int32) int64 {
		first := len(dst)
		label := x.label
		start := x.depth - len(label) - len(pending) // token offset of pending[0]
		for len(label) > 0 {
			if len(pending) == 0 && len(label) >= b {
				// Whole block inside the label: hash it in place.
				hh := h.Next(prev, label[:b])
				dst = append(dst, Block{Hash: hh, Index: start / b})
				prev, start, label = uint64(hh), start+b, label[b:]
				continue
			}
			k := min(b-len(pending), len(label))
			pending = append(pending, label[:k]...)
			label = label[k:]
			if len(pending) == b {
				hh := h.Next(prev, pending)
				dst = append(dst, Block{Hash: hh, Index: start / b})
				prev, start, pending = uint64(hh), start+b, pending[:0]
			}
		}
		mine := len(dst)
		used, ok := endUsed[x]
		for _, c := range x.children {
			// Each child continues from its own copy of the partial block.
			u := visit(c, prev, append(make([]int32, 0, b), pending...))
			if !ok || u > used {
				used, ok = u, true
			}
		}
		for i := first; i < mine; i++ { // the blocks that end in x's label
			dst[i].Used = used
		}
		return used
	}
	visit(t.root, h.Seed(), make([]int32, 0, b))
	return dst
}

// sortBlocksByRecency orders blocks newest first, then by chain position.
func sortBlocksByRecency(bs []Block) {
	slices.SortFunc(bs, func(a, b Block) int {
		switch {
		case a.Used > b.Used:
			return -1
		case a.Used < b.Used:
			return 1
		}
		return a.Index - b.Index
	})
}
