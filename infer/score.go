package infer

import "context"

// Scorer is an engine that can score a given reply: how likely its model
// finds each token of reply after prompt and the reply's tokens before
// it. The router uses it to spot-check what a peer returned (verified
// answers, docs/security.md). Implementations are safe for concurrent use.
type Scorer interface {
	// Score prefills prompt followed by reply (reusing the longest cached
	// prefix, as Generate does) and returns one TokenScore per reply
	// token, in order. It fails with a *ContextError when prompt and reply
	// do not fit in the context together, with ErrBadRequest for an empty
	// prompt or reply or a token outside the vocabulary, and with ErrBusy
	// when the engine's queue is full.
	Score(ctx context.Context, prompt, reply []int32) ([]TokenScore, error)
}

// TokenScore is how the model ranks one token at its position, under the
// model's raw distribution (before penalties, grammar and truncation).
type TokenScore struct {
	// Token is the scored token.
	Token int32 `json:"token"`
	// Rank is how many tokens the model finds strictly more likely (0 for
	// the argmax).
	Rank int `json:"rank"`
	// Logprob is the token's log probability (natural log, floored at
	// -9999 like reported logprobs).
	Logprob float32 `json:"logprob"`
	// TopLogprob is the log probability of the most likely token; the gap
	// TopLogprob - Logprob is 0 for the argmax.
	TopLogprob float32 `json:"top_logprob"`
	// Above is the probability mass of the tokens strictly more likely than
	// this one (0 for the argmax): the token is inside a top-p nucleus iff
	// Above < p.
	Above float32 `json:"above"`
}

// ValidateScore checks a Score call's inputs against the model.
func ValidateScore(prompt, reply []int32, info ModelInfo) error {
	switch {
	case len(prompt) == 0:
		return BadRequestf("score: empty prompt")
	case len(reply) == 0:
		return BadRequestf("score: empty reply")
	case len(prompt)+len(reply) > info.ContextLength:
		return &ContextError{PromptTokens: len(prompt) + len(reply), ContextLength: info.ContextLength}
	}
	for _, toks := range [2][]int32{prompt, reply} {
		for _, t := range toks {
			if t < 0 || (info.VocabSize > 0 && int(t) >= info.VocabSize) {
				return BadRequestf("score: token %d outside the vocabulary", t)
			}
		}
	}
	return nil
}
