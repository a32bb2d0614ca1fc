package synth

import "fmt"

// SentencePiece token types (llama.cpp's llama_token_type).
const (
	tokNormal  int32 = 1
	tokUnknown int32 = 2
	tokControl int32 = 3
	tokByte    int32 = 6
)

// minVocab is <unk>, <s>, </s> and the 256 byte tokens.
const minVocab = 3 + 256

// vocab builds a SentencePiece ("llama") vocabulary of exactly n tokens:
// <unk>=0, <s>=1, </s>=2, <0x00>..<0xFF>, printable ASCII characters alone
// and after "▁" (the SentencePiece space), then lower-case letter pairs,
// triples and quadruples with and without "▁" until n is reached, with the
// control tokens last. Scores decrease with the id (earlier pieces are
// preferred merges), like a trained SentencePiece model's log
// probabilities. Every piece is distinct.
func vocab(n int, control []string) (tokens []string, scores []float32, types []int32) {
	tokens = make([]string, 0, n)
	types = make([]int32, 0, n)
	add := func(tok string, typ int32) {
		tokens = append(tokens, tok)
		types = append(types, typ)
	}
	add("<unk>", tokUnknown)
	add("<s>", tokControl)
	add("</s>", tokControl)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokByte)
	}
	normal := n - len(control)
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	for _, t := range control {
		seen[t] = true
	}
	push := func(p string) bool {
		if len(tokens) >= normal {
			return false
		}
		if !seen[p] {
			seen[p] = true
			add(p, tokNormal)
		}
		return true
	}
	push("▁")
	for c := byte('!'); c <= '~'; c++ {
		push("▁" + string(c))
		push(string(c))
	}
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var grow func(prefix string, depth int) bool
	grow = func(prefix string, depth int) bool {
		if depth == 0 {
			return push("▁"+prefix) && push(prefix)
		}
		for i := range letters {
			if !grow(prefix+letters[i:i+1], depth-1) {
				return false
			}
		}
		return true
	}
	for depth := 2; len(tokens) < normal; depth++ {
		grow("", depth)
	}
	for _, t := range control {
		add(t, tokControl)
	}
	scores = make([]float32, len(tokens))
	for i := range scores {
		if types[i] == tokNormal {
			scores[i] = -float32(i)
		}
	}
	return tokens, scores, types
}
