package node

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// This file holds the router's side of verified answers: after a
// forwarded reply completed (the client has it already), the router
// spot-checks a fraction of them by scoring the returned text under its
// own model (infer.Scorer) in the background, and a reply its model did
// not produce costs the peer all of its trust (Claim.Lied).

// verifyTimeout bounds one background check: it prefills at most
// VerifyBounds.MaxTokens beyond the prompt, so it is long only when the
// engine is stalled.
const verifyTimeout = time.Minute

// VerifyStats counts the router's spot checks.
type VerifyStats struct {
	// Drawn: forwarded replies the fraction selected.
	Drawn int64 `json:"drawn"`
	// Skipped: drawn but not checked (the local engine was busy, a check
	// was in flight, a constrained reply, a tokenizer or scorer error).
	Skipped int64 `json:"skipped"`
	// Checked: replies scored and judged; Lies: those judged lies.
	Checked int64 `json:"checked"`
	Lies    int64 `json:"lies"`
}

// verifier is the router's spot-check state. Its counters are atomic;
// inflight admits one check at a time, so checks never pile up.
type verifier struct {
	scorer   infer.Scorer
	fraction float64
	bounds   VerifyBounds
	rand     func() float64

	inflight                      atomic.Bool
	drawn, skipped, checked, lies atomic.Int64
}

// newVerifier returns nil (no checks) when fraction is 0 or there is no
// scorer.
func newVerifier(s infer.Scorer, fraction float64, b VerifyBounds, rnd func() float64) *verifier {
	if s == nil || fraction <= 0 {
		return nil
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	return &verifier{scorer: s, fraction: fraction, bounds: b, rand: rnd}
}

// Verified returns the router's spot-check counters (zero when checks are
// off).
func (r *Router) Verified() VerifyStats {
	v := r.ver
	if v == nil {
		return VerifyStats{}
	}
	return VerifyStats{Drawn: v.drawn.Load(), Skipped: v.skipped.Load(), Checked: v.checked.Load(), Lies: v.lies.Load()}
}

// maybeVerify draws whether to check peer's completed reply text to req
// and, if so and the local engine has an idle slot and nothing queued,
// starts the check in the background. It never blocks on the check.
func (r *Router) maybeVerify(peer PeerID, req infer.Request, text string) {
	v := r.ver
	if v == nil || text == "" || v.rand() >= v.fraction {
		return
	}
	v.drawn.Add(1)
	st := r.eng.Stats()
	if modeOf(req.Sampling) == verifyNone || st.Queued > 0 || st.Active >= st.Slots || !v.inflight.CompareAndSwap(false, true) {
		v.skipped.Add(1)
		return
	}
	prompt := slices.Clone(req.Prompt)
	go func() {
		defer v.inflight.Store(false)
		r.verify(peer, prompt, req.Sampling, text)
	}()
}

// verify scores text as the reply to prompt and judges it; a lie costs
// peer its trust and puts it on the failure cooldown.
func (r *Router) verify(peer PeerID, prompt []int32, s infer.Sampling, text string) {
	v := r.ver
	reply, skipHead, err := r.replyTokens(text)
	if err == nil {
		room := r.info.ContextLength - len(prompt)
		reply = reply[:max(0, min(len(reply), room, v.bounds.MaxTokens))]
	}
	if err != nil || len(reply) == 0 {
		v.skipped.Add(1)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	scores, err := v.scorer.Score(ctx, prompt, reply)
	if err != nil || len(scores) != len(reply) {
		v.skipped.Add(1)
		r.log.Info("verify: scoring failed", "peer", peer, "err", err)
		return
	}
	skipTail := 0
	if len(s.Stop) > 0 {
		skipTail = 1 // a stop string may have cut the last token
	}
	verdict := JudgeReply(scores, s, skipHead, skipTail, v.bounds)
	v.checked.Add(1)
	if !verdict.Lie {
		return
	}
	v.lies.Add(1)
	now := r.now()
	if r.trust != nil {
		r.trust.Observe(peer, Claim{Lied: true}, now)
	}
	r.mesh.MarkFailure(peer, now)
	r.log.Warn("verify: peer returned a reply its model did not produce", "peer", peer,
		"reason", verdict.Reason, "tokens", verdict.Checked, "worst_rank", verdict.WorstRank,
		"mean_logprob", verdict.MeanLogprob)
}

// replyTokens tokenizes a reply's text as the continuation of a prompt:
// after a "\n" sentinel whose own tokens are then cut, so that a
// SentencePiece tokenizer's space prefix (which Tokenize adds to the
// start of any text) lands on the sentinel, not on the reply's first
// token. When the sentinel merges with the text, it falls back to
// continuationTokens and reports the first token as unsure (skipHead 1).
func (r *Router) replyTokens(text string) (toks []int32, skipHead int, err error) {
	sent, err := r.eng.Tokenize("\n")
	if err != nil {
		return nil, 0, err
	}
	full, err := r.eng.Tokenize("\n" + text)
	if err != nil {
		return nil, 0, err
	}
	if len(full) > len(sent) && slices.Equal(full[:len(sent)], sent) {
		return full[len(sent):], 0, nil
	}
	toks, err = r.continuationTokens(text)
	return toks, 1, err
}
