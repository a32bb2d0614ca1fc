package llama

import (
	"math"

	"github.com/meshllm/meshllm/infer"
)

// minLogprob is the floor of a reported log probability: a token the
// model rules out (a logit of -Inf, or one that underflows) reads as
// -9999 (OpenAI's convention), so every value is finite on every wire.
const minLogprob = -9999

// tokenLogprob is tok's log probability under logits (the model's raw
// distribution at one position), its text, and the top most likely tokens
// with theirs, most likely first. Only the loop calls it.
func (e *Engine) tokenLogprob(logits []float32, tok, top int) infer.TokenLogprob {
	lse := logSumExp(logits)
	lp := infer.TokenLogprob{Token: e.model.TokenToPiece(tok), Logprob: logprob(logits[tok], lse)}
	if top > 0 {
		ids := topTokens(logits, top)
		lp.Top = make([]infer.TopLogprob, len(ids))
		for i, id := range ids {
			lp.Top[i] = infer.TopLogprob{Token: e.model.TokenToPiece(id), Logprob: logprob(logits[id], lse)}
		}
	}
	return lp
}

// logSumExp is log(sum(exp(x))), computed stably in float64.
func logSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if f := float64(v); f > m {
			m = f
		}
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return m
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	return m + math.Log(sum)
}

// logprob is logit's log-softmax given the logits' logSumExp, floored at
// minLogprob and never above 0.
func logprob(logit float32, lse float64) float32 {
	v := float64(logit) - lse
	switch {
	case math.IsNaN(v) || v < minLogprob:
		return minLogprob
	case v > 0:
		return 0
	}
	return float32(v)
}

// topTokens returns the indexes of the n largest values of x, largest
// first (ties: the lower index first). It keeps a sorted window of n, so
// it costs O(len(x)) for the small n logprobs ask for.
func topTokens(x []float32, n int) []int {
	n = min(n, len(x))
	best := make([]int, 0, n)
	for i, v := range x {
		if len(best) == n && !(v > x[best[n-1]]) {
			continue
		}
		if len(best) < n {
			best = append(best, i)
		} else {
			best[n-1] = i
		}
		for j := len(best) - 1; j > 0 && x[best[j]] > x[best[j-1]]; j-- {
			best[j], best[j-1] = best[j-1], best[j]
		}
	}
	return best
}
