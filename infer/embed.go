package infer

import "math"

// MaxEmbedInputs bounds the inputs of one Embed call (OpenAI's limit for
// /v1/embeddings). Each input yields a vector of EmbeddingLength floats, so
// without a bound a request of many one-token inputs would make the engine
// allocate thousands of times its own size.
const MaxEmbedInputs = 2048

// ValidateEmbed checks the inputs of an Embed call before any work is done:
// 1..MaxEmbedInputs inputs, none empty (ErrBadRequest), none longer than
// contextLength tokens (a *ContextError), every token inside a vocabulary of
// vocabSize (when vocabSize > 0). Engines implementing Embedder call it.
func ValidateEmbed(inputs [][]int32, contextLength, vocabSize int) error {
	switch {
	case len(inputs) == 0:
		return BadRequestf("no input to embed")
	case len(inputs) > MaxEmbedInputs:
		return BadRequestf("%d inputs to embed, at most %d", len(inputs), MaxEmbedInputs)
	}
	for i, in := range inputs {
		if len(in) == 0 {
			return BadRequestf("input %d to embed is empty", i)
		}
		if len(in) > contextLength {
			return &ContextError{PromptTokens: len(in), ContextLength: contextLength}
		}
		for _, t := range in {
			if t < 0 || (vocabSize > 0 && int(t) >= vocabSize) {
				return BadRequestf("input %d: token %d outside the vocabulary", i, t)
			}
		}
	}
	return nil
}

// Normalize scales v in place to unit Euclidean length (L2), accumulating
// in float64; a zero vector is left as it is. It returns v.
func Normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 || math.IsNaN(ss) || math.IsInf(ss, 0) {
		return v
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return v
}
