package node

import (
	"fmt"
	"math"

	"github.com/meshllm/meshllm/infer"
)

// VerifyBounds are the limits a spot-checked reply (verified answers,
// docs/security.md) must stay within under the origin's own model. An
// honest peer's logits differ from the origin's only by numerics (thread
// count, batch split, SIMD path), which move a token's log probability by
// hundredths of a nat; the bounds leave orders of magnitude more room
// than that, and a liar (random tokens, another model, perturbed text)
// breaks them by far. DefaultVerifyBounds says why each value.
//
// A VerifyBounds is a plain value; JudgeReply only reads it.
type VerifyBounds struct {
	// GreedyRank: in a greedy reply (temperature 0, no penalties) every
	// token must be among the GreedyRank+1 most likely, or within
	// GreedyGap nats of the most likely (a near-tie that numerics can
	// flip).
	GreedyRank int
	GreedyGap  float32
	// TopKSlack, TopPSlack and MinPSlack widen the sampler's truncation
	// sets for a sampled reply: rank < TopK+TopKSlack, mass above the
	// token < TopP+TopPSlack, and logprob >= top logprob + log(MinP) -
	// MinPSlack.
	TopKSlack int
	TopPSlack float32
	MinPSlack float32
	// MeanLogprob is the floor of a sampled reply's mean log probability
	// per token, checked once it has at least MeanMinTokens scored
	// tokens: sampling from the model keeps it near minus the model's
	// entropy, a reply that is not the model's falls far below.
	MeanLogprob   float32
	MeanMinTokens int
	// MaxTokens bounds the reply tokens scored (the head of a longer reply
	// is scored): it bounds the origin's cost per check.
	MaxTokens int
}

// DefaultVerifyBounds returns the bounds meshllm ships with; the figures
// are from `MESHLLM_MEASURE=1 go test ./infer/llama -run TestVerifyMeasure
// -v` (docs/security.md, "Verified answers").
func DefaultVerifyBounds() VerifyBounds {
	return VerifyBounds{
		// Honest greedy replies from other thread counts and batch sizes
		// scored rank <= 1 at every token, the rank-1 ones near-ties 0.0009
		// nats or less from the top: rank 0 alone would flag them. Rank 3
		// or 0.5 nats absorb a backend whose numerics differ far more (a
		// GPU, another SIMD path) and still caught every replaced token.
		GreedyRank: 3,
		GreedyGap:  0.5,
		// One more token of top-k, 5% more top-p mass, and 0.5 nats of
		// min-p: the same numeric margin for sampled replies.
		TopKSlack: 1,
		TopPSlack: 0.05,
		MinPSlack: 0.5,
		// -6 nats per token (a mean probability of 1/400): honest replies
		// sampled from stories260K at temperature 1.5 without truncation
		// averaged -3.62 at worst; random tokens and another model's
		// reply averaged below -20.
		MeanLogprob:   -6,
		MeanMinTokens: 8,
		// 256 tokens: a check costs one prefill of at most that much
		// beyond the cached prompt.
		MaxTokens: 256,
	}
}

// Validate reports the first bound that cannot work.
func (b VerifyBounds) Validate() error {
	switch {
	case b.GreedyRank < 0 || !(b.GreedyGap >= 0):
		return fmt.Errorf("node: verify greedy rank %d / gap %v", b.GreedyRank, b.GreedyGap)
	case b.TopKSlack < 0 || !(b.TopPSlack >= 0) || !(b.MinPSlack >= 0):
		return fmt.Errorf("node: verify slacks %d / %v / %v", b.TopKSlack, b.TopPSlack, b.MinPSlack)
	case math.IsNaN(float64(b.MeanLogprob)) || b.MeanLogprob > 0 || b.MeanMinTokens < 1:
		return fmt.Errorf("node: verify mean logprob %v over %d tokens", b.MeanLogprob, b.MeanMinTokens)
	case b.MaxTokens < 1:
		return fmt.Errorf("node: verify MaxTokens %d", b.MaxTokens)
	}
	return nil
}

// verifyMode is how a reply's sampling lets it be checked.
type verifyMode int

const (
	// verifyNone: the reply cannot be checked against raw logits (a
	// grammar constrains it: it may force tokens the model ranks low).
	verifyNone verifyMode = iota
	// verifyGreedy: every token is the argmax of the raw logits.
	verifyGreedy
	// verifySampled: tokens come from the sampler's truncation set (when
	// no penalty reorders the logits) and the reply is likely on average.
	verifySampled
)

// modeOf is the verify mode of a request's sampling.
func modeOf(s infer.Sampling) verifyMode {
	if s.Constraint != nil {
		return verifyNone
	}
	if s.Temperature == 0 && !penalized(s) {
		return verifyGreedy
	}
	return verifySampled
}

// penalized reports whether penalties change the logits the sampler sees
// (so that ranks under the raw logits do not bound its choice).
func penalized(s infer.Sampling) bool {
	return (s.RepeatPenalty != 0 && s.RepeatPenalty != 1) || s.PresencePenalty != 0 || s.FrequencyPenalty != 0
}

// Verdict is JudgeReply's finding about one reply.
type Verdict struct {
	// Lie: the reply is not what the model produces under the request's
	// sampling. Bad is the index of the first token that broke a bound
	// (-1 when none did, or when the mean did), Reason what broke.
	Lie    bool
	Bad    int
	Reason string
	// Checked is how many tokens were judged; the rest were skipped.
	Checked int
	// WorstRank, WorstGap (top logprob - logprob) and MeanLogprob summarise
	// the judged tokens.
	WorstRank   int
	WorstGap    float32
	MeanLogprob float32
}

// JudgeReply judges a reply's scores (its tokens' ranks and logprobs under
// the origin's model) against the request's sampling s and the bounds b.
// The first skipHead and last skipTail tokens are not judged: their
// tokenization is uncertain (a tokenizer's space prefix at the seam, a
// token cut by a stop string). Pure.
func JudgeReply(scores []infer.TokenScore, s infer.Sampling, skipHead, skipTail int, b VerifyBounds) Verdict {
	v := Verdict{Bad: -1}
	mode := modeOf(s)
	lo, hi := max(0, skipHead), len(scores)-max(0, skipTail)
	if mode == verifyNone || hi <= lo {
		return v
	}
	trunc := !penalized(s)
	var sum float64
	for i := lo; i < hi; i++ {
		ts := scores[i]
		gap := ts.TopLogprob - ts.Logprob
		v.Checked++
		v.WorstRank = max(v.WorstRank, ts.Rank)
		v.WorstGap = max(v.WorstGap, gap)
		sum += float64(ts.Logprob)
		if v.Lie {
			continue
		}
		why := ""
		switch {
		case mode == verifyGreedy && ts.Rank > b.GreedyRank && gap > b.GreedyGap:
			why = fmt.Sprintf("rank %d (gap %.3g nats) in a greedy reply", ts.Rank, gap)
		case mode == verifySampled && trunc && s.TopK > 0 && ts.Rank >= s.TopK+b.TopKSlack:
			why = fmt.Sprintf("rank %d outside top_k %d", ts.Rank, s.TopK)
		case mode == verifySampled && trunc && s.TopP > 0 && s.TopP < 1 && ts.Above >= s.TopP+b.TopPSlack:
			why = fmt.Sprintf("%.3g of the mass above it, outside top_p %g", ts.Above, s.TopP)
		case mode == verifySampled && trunc && s.MinP > 0 && float64(ts.Logprob) < float64(ts.TopLogprob)+math.Log(float64(s.MinP))-float64(b.MinPSlack):
			why = fmt.Sprintf("logprob %.3g below min_p %g of the top %.3g", ts.Logprob, s.MinP, ts.TopLogprob)
		}
		if why != "" {
			v.Lie, v.Bad, v.Reason = true, i, fmt.Sprintf("token %d: %s", i, why)
		}
	}
	v.MeanLogprob = float32(sum / float64(v.Checked))
	if !v.Lie && mode == verifySampled && v.Checked >= b.MeanMinTokens && v.MeanLogprob < b.MeanLogprob {
		v.Lie, v.Reason = true, fmt.Sprintf("mean logprob %.3g below %.3g", v.MeanLogprob, b.MeanLogprob)
	}
	return v
}
