package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// Outcomes of one forward.
const (
	outcomeServed   = "served"
	outcomeBusy     = "busy"
	outcomeTimeout  = "timeout"
	outcomeError    = "error"
	outcomeRejected = "rejected"
	outcomeClient   = "client"
	// outcomeViolation: the peer's reply broke the request's bounds
	// (replyBounds) and was cut.
	outcomeViolation = "violation"
)

// errForwardTimeout cancels a forward whose peer went quiet for too long.
var errForwardTimeout = errors.New("node: forwarded request timed out")

// errForwardOver is what emit returns once Forward has returned (a
// Forwarder that calls it later breaks its contract; nothing is relayed).
var errForwardOver = errors.New("node: the forward is over")

// stream is the client's side of one request across its attempts: what
// reached the client so far. Only the goroutine running the current
// attempt's emit touches it (Forward calls emit from one goroutine, and
// attempts are sequential).
type stream struct {
	emit      func(infer.Piece) error
	start     time.Time
	now       func() time.Time
	text      strings.Builder
	pieces    int // pieces sent to the client
	tokens    int // tokens those pieces account for
	firstAt   time.Time
	clientErr error // emit's error: the client is gone
	byPeer    map[PeerID]int
}

func (s *stream) send(peer PeerID, p infer.Piece) error {
	if err := s.emit(p); err != nil {
		s.clientErr = err
		return err
	}
	if s.pieces == 0 {
		s.firstAt = s.now()
	}
	s.pieces++
	s.tokens += p.Tokens
	s.text.WriteString(p.Text)
	if s.byPeer == nil {
		s.byPeer = map[PeerID]int{}
	}
	s.byPeer[peer]++
	return nil
}

func (s *stream) piecesOf(peer PeerID) int { return s.byPeer[peer] }

// forward runs one attempt on c.Peer under a watchdog: the first piece
// must come within c.Cost + Policy.FirstPieceTimeout, and each further one
// within Policy.StallTimeout of the previous, or the attempt is cancelled
// as timed out. Every piece is checked against the request's bounds (see
// replyBounds) before it is relayed: the first one out of bounds cuts the
// stream (the attempt's context is cancelled and emit refuses it and every
// later piece), and the final result is checked too. It classifies the end
// as one of the outcomes.
func (r *Router) forward(ctx context.Context, c Candidate, req infer.Request, st *stream) (*infer.Result, string, error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex // orders the watchdog's firing with emit's checks and resets
	bounds := newReplyBounds(req, r.info.ContextLength)
	var stopped error // the first error emit returned (timeout, violation, client); sticky
	stop := func(err error) error {
		mu.Lock()
		defer mu.Unlock()
		if stopped == nil {
			stopped = err
		}
		return stopped
	}
	watchdog := time.AfterFunc(c.Cost+r.policy.FirstPieceTimeout, func() {
		stop(errForwardTimeout)
		cancel(errForwardTimeout)
	})
	defer watchdog.Stop()
	emit := func(p infer.Piece) error {
		mu.Lock()
		if stopped != nil {
			mu.Unlock()
			return stopped
		}
		if err := bounds.piece(p); err != nil {
			stopped = err
			mu.Unlock()
			cancel(err)
			return err
		}
		watchdog.Reset(r.policy.StallTimeout)
		mu.Unlock()
		if err := st.send(c.Peer, p); err != nil {
			return stop(err)
		}
		return nil
	}
	res, err := r.fwd.Forward(fctx, c.Peer, req, c.EstimatedCached, emit)
	cut := stop(errForwardOver) // no more pieces reach the client
	switch {
	case errors.Is(cut, ErrReplyViolation):
		return nil, outcomeViolation, fmt.Errorf("peer %s: %w", c.Peer, cut)
	case st.clientErr != nil:
		return nil, outcomeClient, st.clientErr
	case ctx.Err() != nil:
		return nil, outcomeClient, ctx.Err()
	case errors.Is(cut, errForwardTimeout) || errors.Is(context.Cause(fctx), errForwardTimeout):
		return nil, outcomeTimeout, fmt.Errorf("peer %s: %w", c.Peer, errForwardTimeout)
	case err == nil && res != nil:
		if verr := bounds.final(res); verr != nil {
			return nil, outcomeViolation, fmt.Errorf("peer %s: %w", c.Peer, verr)
		}
		return res, outcomeServed, nil
	case err == nil:
		return nil, outcomeError, fmt.Errorf("peer %s: forward returned no result", c.Peer)
	case errors.Is(err, infer.ErrBusy):
		return nil, outcomeBusy, err
	case errors.Is(err, infer.ErrBadRequest) || errors.Is(err, infer.ErrContextOverflow):
		return nil, outcomeRejected, err
	}
	return nil, outcomeError, err
}

// continueLocal finishes a reply a peer broke off mid-stream: the local
// engine generates with the prompt extended by the tokens of the text the
// client already has, for the tokens left of MaxTokens. The result
// describes the whole reply: the original prompt, the generated tokens of
// both parts, the time to the first piece the client saw, and the local
// part's cache use and timings.
//
// A constrained reply (structured output, a tool call) cannot be continued:
// the grammar would start again from its beginning on text that is already
// half a value, so the request fails instead of returning broken JSON.
func (r *Router) continueLocal(ctx context.Context, req infer.Request, st *stream) (*infer.Result, error) {
	if req.Sampling.Constraint != nil {
		return nil, fmt.Errorf("%w: the serving peer broke off a constrained reply after %d tokens, and a grammar cannot resume mid-value", infer.ErrEngine, st.tokens)
	}
	ext, err := r.continuationTokens(st.text.String())
	if err != nil {
		return nil, err
	}
	cont := infer.Request{Prompt: append(slices.Clip(req.Prompt), ext...), Sampling: req.Sampling}
	done := len(cont.Prompt) >= r.info.ContextLength
	if m := req.Sampling.MaxTokens; m > 0 {
		cont.Sampling.MaxTokens = m - st.tokens
		done = done || cont.Sampling.MaxTokens <= 0
	}
	if done {
		r.met.served.WithLabelValues("continued").Inc()
		return &infer.Result{
			PromptTokens: len(req.Prompt), GeneratedTokens: st.tokens,
			TimeToFirst: st.firstAt.Sub(st.start), FinishReason: infer.FinishLength, Slot: -1,
		}, nil
	}
	sent := st.tokens
	res, err := r.eng.Generate(ctx, cont, func(p infer.Piece) error { return st.send("", p) })
	if err != nil {
		return nil, err
	}
	r.speeds.Observe(res)
	r.met.served.WithLabelValues("continued").Inc()
	out := *res
	out.PromptTokens = len(req.Prompt)
	out.CachedTokens = min(res.CachedTokens, len(req.Prompt))
	out.GeneratedTokens = sent + res.GeneratedTokens
	out.TimeToFirst = st.firstAt.Sub(st.start)
	return &out, nil
}

// continuationTokens tokenizes text as a continuation: the model's tokens
// for it without the BOS token Tokenize adds (found as the tokens of the
// empty text).
func (r *Router) continuationTokens(text string) ([]int32, error) {
	toks, err := r.eng.Tokenize(text)
	if err != nil {
		return nil, err
	}
	bos, err := r.eng.Tokenize("")
	if err != nil {
		return nil, err
	}
	if len(bos) > 0 && len(toks) >= len(bos) && slices.Equal(toks[:len(bos)], bos) {
		toks = toks[len(bos):]
	}
	return toks, nil
}
