package dashboard

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/node"
)

// HotPrefix is one cached prefix, or a family of them, as the dashboard
// shows it.
type HotPrefix struct {
	// Label names the prefix in a few words: the text of its first tokens
	// when a detokenizer is given, else a short hash of them. Cached
	// sequences with the same label (prompts that start alike: one system
	// prompt, different questions) are one entry.
	Label string `json:"label"`
	// Tokens is the longest such sequence's length, Sequences how many
	// distinct sequences share the label, Slots how many engine slots hold
	// them.
	Tokens    int `json:"tokens"`
	Sequences int `json:"sequences"`
	Slots     int `json:"slots"`
}

// labelTokens is how many leading tokens name a prefix.
const labelTokens = 32

// HotPrefixes returns a Config.HotPrefixes over an engine's
// radix tree (an infer/sim or llama engine is a CacheHolder): the n most
// recently used families of cached sequences, most recent first, each
// labelled by label(its first 32 tokens) or, when label is nil or returns
// "", by a hash of them. The tree is read under the engine's lock (one
// walk); label runs after the lock is released, so it may be slow-ish (a
// detokenizer). The returned func is safe for concurrent use when label is.
func HotPrefixes(c node.CacheHolder, n int, label func(tokens []int32) string) func() []HotPrefix {
	type leaf struct {
		head   []int32
		tokens int
		slots  int
		used   int64
	}
	type family struct {
		HotPrefix
		used int64
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
		byLabel := map[string]*family{}
		var fams []*family
		for _, l := range leaves {
			name := ""
			if label != nil {
				name = label(l.head)
			}
			if name == "" {
				name = hashLabel(l.head)
			}
			f, ok := byLabel[name]
			if !ok {
				f = &family{HotPrefix: HotPrefix{Label: name}}
				byLabel[name] = f
				fams = append(fams, f)
			}
			f.Tokens = max(f.Tokens, l.tokens)
			f.Sequences++
			f.Slots += l.slots
			f.used = max(f.used, l.used)
		}
		slices.SortStableFunc(fams, func(a, b *family) int {
			if c := cmp.Compare(b.used, a.used); c != 0 {
				return c
			}
			return cmp.Compare(b.Tokens, a.Tokens)
		})
		out := make([]HotPrefix, 0, min(n, len(fams)))
		for _, f := range fams[:min(n, len(fams))] {
			out = append(out, f.HotPrefix)
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
