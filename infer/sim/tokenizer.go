package sim

import (
	"hash/fnv"
	"unicode"
	"unicode/utf8"
)

// Special token ids of the simulated vocabulary.
const (
	TokenUnknown int32 = 0
	TokenBOS     int32 = 1
	TokenEOS     int32 = 2
	firstWord    int32 = 3
)

// Tokenizer is the simulated model's tokenizer: BOS, then one token per
// piece of text, where a piece is a run of letters and digits together with
// the spaces before it (as SentencePiece's "▁word"), or any other single
// character (punctuation, a newline). A piece's id is its FNV-1a hash
// folded into [3, vocab). It is deterministic and allocation-light; it
// cannot decode ids back (the engine keeps the text of what it generates).
// A Tokenizer is an immutable value, safe for concurrent use.
type Tokenizer struct {
	vocab int32
}

// NewTokenizer returns a tokenizer over vocab ids (vocab > 3).
func NewTokenizer(vocab int) Tokenizer { return Tokenizer{vocab: int32(vocab)} }

// Encode returns BOS followed by the ids of text's pieces.
func (t Tokenizer) Encode(text string) []int32 {
	out := make([]int32, 1, 1+len(text)/4)
	out[0] = TokenBOS
	for len(text) > 0 {
		n := pieceLen(text)
		out = append(out, t.ID(text[:n]))
		text = text[n:]
	}
	return out
}

// ID returns the id of one piece.
func (t Tokenizer) ID(piece string) int32 {
	h := fnv.New64a()
	h.Write([]byte(piece))
	return firstWord + int32(h.Sum64()%uint64(t.vocab-firstWord))
}

// pieceLen returns the byte length of the first piece of s (len(s) > 0).
func pieceLen(s string) int {
	i := 0
	for i < len(s) && s[i] == ' ' {
		i++
	}
	start := i
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		i += n
	}
	switch {
	case i > start:
		return i // spaces + word
	case start > 0:
		return start // spaces before punctuation: a piece of their own
	}
	_, n := utf8.DecodeRuneInString(s)
	return n
}
