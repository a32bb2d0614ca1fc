package llama

import (
	"math"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
)

// grammarGuard mirrors one sequence's grammar so the engine can tell, before
// llama.cpp's sampler does, that the grammar admits no token at all: the
// sampler's last stage then finds no candidate and aborts the whole process
// (an assertion in llama_sampler_dist_apply). A schema can ask for that — a
// pattern that needs a NUL character, which no token's text can hold — so
// without this one request, local or forwarded, would kill the peer.
//
// Checking the whole vocabulary at every token would cost about as much as
// decoding it (38 ms for a 152k-token vocabulary here, against 88 ms a
// token for a 0.5B model), so viable first tries the tokens whose text is
// one byte, and the end-of-generation tokens: byte-level and byte-fallback
// vocabularies have every byte, and the grammar accepts a byte that begins
// an allowed character, so one of them passes wherever the grammar can go
// on. Only when none does is the whole vocabulary checked.
//
// A grammarGuard is used by the engine's loop goroutine only.
type grammarGuard struct {
	g     *llama.Grammar
	probe []llama.TokenData // one-byte tokens and end-of-generation tokens
	all   []llama.TokenData // the whole vocabulary; made on first need
	vocab int
	one   [1]llama.TokenData
}

// vocabTables are the vocabulary as the binding's grammar wants it: ids,
// their text, and the end-of-generation tokens. Built once per engine.
type vocabTables struct {
	ids    []uint32
	pieces []string
	eog    []int32
	probe  []int32 // tokens whose text is one byte, then eog
}

func (e *Engine) vocabTables() *vocabTables {
	e.vocabOnce.Do(func() {
		n := e.model.NumVocab()
		v := &vocabTables{ids: make([]uint32, n), pieces: make([]string, n)}
		for i := range n {
			v.ids[i] = uint32(i)
			v.pieces[i] = e.model.TokenToPiece(i)
			if e.model.TokenIsEog(i) {
				v.eog = append(v.eog, int32(i))
			} else if len(v.pieces[i]) == 1 {
				v.probe = append(v.probe, int32(i))
			}
		}
		v.probe = append(v.probe, v.eog...)
		e.vocab = v
	})
	return e.vocab
}

// newGrammarGuard parses grammar (already checked by constraintGrammar) over
// the engine's vocabulary.
func (e *Engine) newGrammarGuard(grammar string) (*grammarGuard, error) {
	v := e.vocabTables()
	g := llama.NewGrammar(grammar, v.ids, v.pieces, v.eog)
	if g == nil {
		return nil, infer.BadRequestf("json schema gives a grammar llama.cpp cannot parse")
	}
	probe := make([]llama.TokenData, len(v.probe))
	for i, id := range v.probe {
		probe[i].ID = id
	}
	return &grammarGuard{g: g, probe: probe, vocab: len(v.ids)}, nil
}

// viable reports whether some token (end-of-generation included, once the
// grammar is complete) may come next.
func (g *grammarGuard) viable() bool {
	if g.anyAllowed(g.probe) {
		return true
	}
	if g.all == nil {
		g.all = make([]llama.TokenData, g.vocab)
		for i := range g.all {
			g.all[i].ID = int32(i)
		}
	}
	return g.anyAllowed(g.all)
}

// anyAllowed applies the grammar to tokens and reports whether one passed.
func (g *grammarGuard) anyAllowed(tokens []llama.TokenData) bool {
	if len(tokens) == 0 {
		return false
	}
	for i := range tokens {
		tokens[i].Logit = 0
	}
	g.g.Apply(tokens)
	for _, t := range tokens {
		if !math.IsInf(float64(t.Logit), -1) {
			return true
		}
	}
	return false
}

// accept advances the mirror by tok, which the sampler chose under the same
// grammar. It checks tok first, as accepting a token the grammar refuses
// throws a C++ exception through cgo; false means the two grammars
// disagree and the sequence must end.
func (g *grammarGuard) accept(tok int) bool {
	g.one[0] = llama.TokenData{ID: int32(tok)}
	g.g.Apply(g.one[:])
	if math.IsInf(float64(g.one[0].Logit), -1) {
		return false
	}
	g.g.Accept(int32(tok))
	return true
}

// free releases the grammar; the guard is unusable afterwards.
func (g *grammarGuard) free() {
	if g != nil {
		g.g.Free()
	}
}
