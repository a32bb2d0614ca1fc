package node

import (
	"errors"
	"fmt"

	"github.com/meshllm/meshllm/infer"
)

// ErrReplyViolation is wrapped by the error that cuts a forwarded reply
// breaking the request's bounds (see replyBounds): the serving peer is at
// fault, and the origin finishes the reply itself.
var ErrReplyViolation = errors.New("node: the serving peer's reply broke the request's bounds")

// replyBounds holds one serving peer's reply to what the request allows,
// piece by piece, before a piece is relayed to the client:
//
//   - tokens: the pieces' Tokens, and the final's GeneratedTokens, at most
//     the request's MaxTokens (when 0: the room the prompt leaves in the
//     origin's context);
//   - at least one token per piece, except one zero-token piece carrying
//     the text held back for a stop string that never matched (engines
//     flush it at the end: infer/sim does); nothing may follow it;
//   - text: at most MaxReplyBytesPerToken bytes per token, summed over the
//     reply;
//   - logprobs: none unless asked for, at most one per token of its piece,
//     each with at most the asked-for alternatives (and
//     infer.MaxTopLogprobs), each token text at most
//     MaxReplyBytesPerToken bytes.
//
// So a reply of n tokens is at most n pieces plus one, and n x
// MaxReplyBytesPerToken bytes of text (n x 21 x MaxReplyBytesPerToken with
// logprobs), whatever the peer sends.
//
// A replyBounds is used by one goroutine at a time (the router's emit
// wrapper serializes it with a mutex).
type replyBounds struct {
	maxTokens int
	logprobs  bool
	top       int
	tokens    int // accounted by the pieces so far
	bytes     int // of text so far
	flushed   bool
}

// newReplyBounds returns the bounds of a reply to req on a model with
// contextLength tokens of context.
func newReplyBounds(req infer.Request, contextLength int) replyBounds {
	limit := req.Sampling.MaxTokens
	if room := contextLength - len(req.Prompt); limit <= 0 || limit > room {
		limit = room
	}
	return replyBounds{
		maxTokens: max(limit, 0), logprobs: req.Sampling.Logprobs,
		top: min(max(req.Sampling.TopLogprobs, 0), infer.MaxTopLogprobs),
	}
}

// piece checks p, the next piece of the reply, and accounts for it; an
// error wrapping ErrReplyViolation says why p must not be relayed.
func (b *replyBounds) piece(p infer.Piece) error {
	switch {
	case b.flushed:
		return fmt.Errorf("%w: a piece after a zero-token piece", ErrReplyViolation)
	case p.Tokens < 0:
		return fmt.Errorf("%w: a piece of %d tokens", ErrReplyViolation, p.Tokens)
	case p.Tokens > b.maxTokens-b.tokens:
		return fmt.Errorf("%w: %d tokens after %d, the request allows %d", ErrReplyViolation, p.Tokens, b.tokens, b.maxTokens)
	case len(p.Text) > (b.tokens+p.Tokens)*MaxReplyBytesPerToken-b.bytes:
		return fmt.Errorf("%w: %d bytes of text for %d tokens, at most %d a token", ErrReplyViolation,
			b.bytes+len(p.Text), b.tokens+p.Tokens, MaxReplyBytesPerToken)
	case len(p.Logprobs) > 0 && !b.logprobs:
		return fmt.Errorf("%w: logprobs the request did not ask for", ErrReplyViolation)
	case len(p.Logprobs) > p.Tokens:
		return fmt.Errorf("%w: %d logprobs for %d tokens", ErrReplyViolation, len(p.Logprobs), p.Tokens)
	}
	for _, lp := range p.Logprobs {
		if len(lp.Token) > MaxReplyBytesPerToken || len(lp.Top) > b.top {
			return fmt.Errorf("%w: a logprob of %d bytes with %d alternatives, at most %d bytes and %d", ErrReplyViolation,
				len(lp.Token), len(lp.Top), MaxReplyBytesPerToken, b.top)
		}
		for _, t := range lp.Top {
			if len(t.Token) > MaxReplyBytesPerToken {
				return fmt.Errorf("%w: an alternative of %d bytes, at most %d", ErrReplyViolation, len(t.Token), MaxReplyBytesPerToken)
			}
		}
	}
	b.tokens += p.Tokens
	b.bytes += len(p.Text)
	b.flushed = p.Tokens == 0
	return nil
}

// final checks the reply's result.
func (b *replyBounds) final(res *infer.Result) error {
	if res.GeneratedTokens > b.maxTokens || res.GeneratedTokens < 0 {
		return fmt.Errorf("%w: the result claims %d generated tokens, the request allows %d", ErrReplyViolation, res.GeneratedTokens, b.maxTokens)
	}
	return nil
}
