package infer

import "github.com/meshllm/meshllm/cache"

// KV is the part of an engine's KV cache that Slots drives: sequence ids are
// slot numbers, positions are token offsets. llama.cpp's llama_memory_seq_rm
// and llama_memory_seq_cp (with a unified KV cache, so that a copied prefix
// shares its cells instead of duplicating them) are the real implementation.
type KV interface {
	// SeqRm removes positions [p0, p1) of seq; p1 < 0 means "to the end".
	SeqRm(seq, p0, p1 int) bool
	// SeqCp makes dst share src's cells for positions [p0, p1).
	SeqCp(src, dst, p0, p1 int)
}

// NopKV is a KV that holds no tensors, for engines that only model the cache
// (the simulated engine) and for tests.
type NopKV struct{}

func (NopKV) SeqRm(int, int, int) bool { return true }
func (NopKV) SeqCp(int, int, int, int) {}

// Slots assigns requests to KV slots so that each one reuses the longest
// cached prefix held by ANY slot, and evicts by LRU when KV cells run out.
//
// A slot is a sequence id of the engine's unified KV cache. The cache.Tree
// inside is exactly the union of what the slots hold: a prefix shared by
// several slots (copied with SeqCp) counts once, so Tree.Size is the number
// of KV cells in use and Tree.Capacity the number the engine has.
//
// Policy, in Acquire:
//   - find the longest match m over all slots (source slot s);
//   - serve in s itself when it is idle and holds nothing beyond m (nothing
//     is lost); otherwise copy s[:m] into the least recently used idle slot,
//     so that s keeps its longer sequence for later requests;
//   - make room for the uncached tokens plus the reply reservation by
//     clearing least-recently-used idle slots (each frees only the cells no
//     other slot shares) — LRU by KV cells.
//
// Slots is not safe for concurrent use: the engine's scheduling goroutine
// owns it. Match may be called from elsewhere only under the owner's lock.
type Slots struct {
	kv   KV
	tree *cache.Tree
	busy []bool
	used []int64 // last Acquire/Release time per slot (LRU order)
}

// NewSlots returns n empty slots sharing capacity KV cells.
func NewSlots(n, capacity int, kv KV) *Slots {
	return &Slots{
		kv:   kv,
		tree: cache.NewTree(n, capacity),
		busy: make([]bool, n),
		used: make([]int64, n),
	}
}

// Acquire picks a slot for prompt and prepares its KV so that the slot holds
// the cached prefix prompt[:cached], with cached < len(prompt) (the last
// prompt token is always evaluated, to get its logits). It also frees KV
// cells for the len(prompt)-cached tokens still to prefill plus reserve
// tokens of reply. ok is false when no slot is idle or the cells cannot be
// freed now; the caller retries after a Release.
func (s *Slots) Acquire(prompt []int32, reserve int, now int64) (slot, cached int, ok bool) {
	m, h := s.tree.Match(prompt)
	src := int(h)
	if m >= len(prompt) {
		m = len(prompt) - 1
	}
	if m <= 0 {
		m, src = 0, -1
	}
	dst := s.pick(src, m)
	if dst < 0 {
		return -1, 0, false
	}
	if dst != src {
		s.kv.SeqRm(dst, 0, -1)
		s.tree.Clear(cache.Handle(dst))
		if m > 0 {
			s.kv.SeqCp(src, dst, 0, m)
			s.tree.Set(cache.Handle(dst), prompt[:m], now)
		}
	} else {
		s.kv.SeqRm(dst, m, -1)
		s.tree.Truncate(cache.Handle(dst), m)
	}
	s.tree.Lock(cache.Handle(dst))
	s.tree.Touch(cache.Handle(dst), now)
	need := len(prompt) - m + reserve
	if short := need - s.tree.Free(); short > 0 {
		victims := s.tree.Victims(short)
		if len(victims) == 0 {
			s.tree.Unlock(cache.Handle(dst))
			return -1, 0, false
		}
		for _, v := range victims {
			s.kv.SeqRm(int(v), 0, -1)
			s.tree.Clear(v)
		}
	}
	s.busy[dst] = true
	s.used[dst] = now
	return dst, m, true
}

// pick chooses the slot to serve in: src itself when idle and nothing beyond
// the match would be lost, else the least recently used idle slot other than
// src (empty slots first), else src when idle. -1 when every slot is busy.
func (s *Slots) pick(src, m int) int {
	if src >= 0 && !s.busy[src] && s.tree.Len(cache.Handle(src)) <= m {
		return src
	}
	best := -1
	for i := range s.busy {
		if s.busy[i] || i == src {
			continue
		}
		if best < 0 || s.lessRecent(i, best) {
			best = i
		}
	}
	if best < 0 && src >= 0 && !s.busy[src] {
		return src
	}
	return best
}

// lessRecent orders idle slots for reuse: empty ones first, then by LRU.
func (s *Slots) lessRecent(a, b int) bool {
	ea, eb := s.tree.Len(cache.Handle(a)) == 0, s.tree.Len(cache.Handle(b)) == 0
	if ea != eb {
		return ea
	}
	return s.used[a] < s.used[b]
}

// Append records tokens whose KV the engine has just computed in slot.
//
// When another slot already holds the same tokens at the same positions
// (two requests with one prompt prefilled side by side), the tree counts
// them once but the KV cache holds two copies. Append then makes slot share
// the other slot's cells (SeqRm + SeqCp of the duplicated range) so that the
// KV cache, like the tree, holds them once.
func (s *Slots) Append(slot int, toks ...int32) {
	before, start := s.tree.Size(), s.tree.Len(cache.Handle(slot))
	s.tree.Append(cache.Handle(slot), toks...)
	if s.tree.Size()-before == len(toks) {
		return // all new cells: nothing duplicated
	}
	seq := s.tree.Seq(cache.Handle(slot))
	for h := range s.busy {
		if h == slot {
			continue
		}
		other := s.tree.Seq(cache.Handle(h))
		if len(other) <= start || commonPrefix(other, seq) <= start {
			continue
		}
		end := commonPrefix(other, seq)
		s.kv.SeqRm(slot, start, end)
		s.kv.SeqCp(h, slot, start, end)
		start = end
		if start == len(seq) {
			return
		}
	}
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Release ends the request in slot; its tokens stay cached.
func (s *Slots) Release(slot int, now int64) {
	if !s.busy[slot] {
		return
	}
	s.busy[slot] = false
	s.used[slot] = now
	s.tree.Unlock(cache.Handle(slot))
	s.tree.Touch(cache.Handle(slot), now)
}

// Drop ends the request in slot and forgets its tokens (after an engine
// failure left its KV in doubt).
func (s *Slots) Drop(slot int, now int64) {
	s.Release(slot, now)
	s.kv.SeqRm(slot, 0, -1)
	s.tree.Clear(cache.Handle(slot))
}

// Match returns how many leading tokens of tokens some slot holds.
func (s *Slots) Match(tokens []int32) int {
	n, _ := s.tree.Match(tokens)
	return n
}

// Len returns how many tokens slot holds.
func (s *Slots) Len(slot int) int { return s.tree.Len(cache.Handle(slot)) }

// Seq returns the tokens slot holds.
func (s *Slots) Seq(slot int) []int32 { return s.tree.Seq(cache.Handle(slot)) }

// Tree exposes the radix tree (read-only use: digests, tests).
func (s *Slots) Tree() *cache.Tree { return s.tree }

// SlotStats is the cache part of Stats.
type SlotStats struct {
	Slots, Busy, Cells, Capacity, Leaves int
}

// Stats reports occupancy.
func (s *Slots) Stats() SlotStats {
	st := SlotStats{Slots: len(s.busy), Cells: s.tree.Size(), Capacity: s.tree.Capacity(), Leaves: s.tree.Leaves()}
	for _, b := range s.busy {
		if b {
			st.Busy++
		}
	}
	return st
}
