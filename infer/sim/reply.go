package sim

import (
	"encoding/binary"
	"hash/fnv"
)

// replier produces a request's reply: pseudo-random words, a function of
// the sampling seed and the prompt only. Not safe for concurrent use (one
// per request).
type replier struct {
	state uint64
	words []string
	n     int // words produced
}

func newReplier(seed int64, prompt []int32) *replier {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	for _, t := range prompt {
		binary.LittleEndian.PutUint32(b[:4], uint32(t))
		h.Write(b[:4])
	}
	return &replier{state: h.Sum64(), words: replyWords()}
}

// next returns the next piece of text (a word with its leading space, or
// punctuation) and a uniform draw in [0, 1) for the end-of-reply decision.
func (r *replier) next() (string, float64) {
	x := r.rand()
	r.n++
	w := r.words[x%uint64(len(r.words))]
	switch {
	case r.n == 1:
		w = " " + w
	case x>>32%9 == 0:
		w = "."
	case x>>32%13 == 0:
		w = ","
	default:
		w = " " + w
	}
	return w, float64(r.rand()>>11) / (1 << 53)
}

// rand is splitmix64.
func (r *replier) rand() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func replyWords() []string {
	return []string{
		"the", "a", "model", "answer", "is", "cache", "prefix", "peer", "mesh", "token",
		"was", "and", "of", "to", "in", "it", "that", "on", "for", "with",
		"once", "upon", "time", "there", "little", "girl", "named", "Lily", "she", "loved",
		"play", "outside", "sun", "tree", "big", "happy", "day", "friend", "went", "park",
		"B", "C", "D", "A", "because", "so", "then", "saw", "found", "small",
	}
}
