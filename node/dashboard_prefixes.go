package node

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/meshllm/meshllm/cache"
)

// HotPrefix is one cached prefix as the dashboard shows it.
type HotPrefix struct {
	// Label names the prefix in a few words: the text of its first tokens
	// when a detokenizer is given, else a short hash of them (prefixes
	// that start alike share it, so a family of prompts is recognisable).
	Label string `json:"label"`
	// Tokens is the prefix's length; Slots how many engine slots hold it.
	Tokens int `json:"tokens"`
	Slots  int `json:"slots"`
}

// labelTokens is how many leading tokens name a prefix.
const labelTokens = 32

// HotPrefixes returns a DashboardConfig.HotPrefixes over an engine's
// radix tree (an infer/sim or llama engine is a CacheHolder): the n
// most recently used cached sequences, most recent first, each labelled by
// label(first tokens) or, when label is nil, by a hash of its first 32
// tokens. The tree is read under the engine's lock (one walk); label runs
// after the lock is released, so it may be slow-ish (a detokenizer).
func HotPrefixes(c CacheHolder, n int, label func(tokens []int32) string) func() []HotPrefix {
	type leaf struct {
		head   []int32
		tokens int
		slots  int
		used   int64
	}
	return func() []HotPrefix {
		var leaves []leaf
		c.WithCache(func(t *cache.Tree) {
			t.Walk(func(seq []int32, handles []cache.Handle) {
				l := leaf{head: slices.Clone(seq[:min(len(seq), labelTokens)]), tokens: len(seq), slots: len(handles)}
				for _, h := range handles {
					l.used = max(l.used, t.LastUsed(h))
				}
				leaves = append(leaves, l)
			})
		})
		slices.SortStableFunc(leaves, func(a, b leaf) int {
			if c := cmp.Compare(b.used, a.used); c != 0 {
				return c
			}
			return cmp.Compare(b.tokens, a.tokens)
		})
		out := make([]HotPrefix, 0, min(n, len(leaves)))
		for _, l := range leaves[:min(n, len(leaves))] {
			name := ""
			if label != nil {
				name = label(l.head)
			}
			if name == "" {
				name = hashLabel(l.head)
			}
			out = append(out, HotPrefix{Label: name, Tokens: l.tokens, Slots: l.slots})
		}
		return out
	}
}

// hashLabel names tokens by a 24-bit FNV-1a hash, as "#3fa9c1".
func hashLabel(tokens []int32) string {
	h := fnv.New32a()
	var b [4]byte
	for _, t := range tokens {
		b[0], b[1], b[2], b[3] = byte(t), byte(t>>8), byte(t>>16), byte(t>>24)
		h.Write(b[:])
	}
	return fmt.Sprintf("#%06x", h.Sum32()&0xffffff)
}
