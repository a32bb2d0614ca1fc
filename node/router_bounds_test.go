package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// This file attacks an origin from a serving peer whose reply breaks the
// request's bounds: more text, more tokens or more logprobs than the
// request allows.

// flood is a hostile reply: pieces(i) is the i-th piece (ok false: the
// stream ends), and generated the GeneratedTokens its final claims.
type flood struct {
	name      string
	piece     func(i int) (infer.Piece, bool)
	generated int
	logprobs  bool // the request asks for logprobs
}

// floodForwarder streams f's pieces for every forward, ignoring emit's
// errors (a hostile Forwarder need not honour them), then returns a
// result, unless ctx ends first.
func floodForwarder(f flood) Forwarder {
	return forwardFunc(func(ctx context.Context, _ PeerID, _ infer.Request, _ int, emit func(infer.Piece) error) (*infer.Result, error) {
		for i := 0; ; i++ {
			p, ok := f.piece(i)
			if !ok || ctx.Err() != nil {
				break
			}
			_ = emit(p)
		}
		return &infer.Result{PromptTokens: 600, CachedTokens: 600, GeneratedTokens: f.generated, FinishReason: infer.FinishLength, Slot: -1}, nil
	})
}

var megabyte = strings.Repeat("x", 1<<20)

func floods() []flood {
	word := func(i int) infer.Piece { return infer.Piece{Text: " w", Tokens: 1} }
	return []flood{
		{name: "1MB-pieces", generated: 8, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: megabyte, Tokens: 1}, i < 32
		}},
		{name: "128-bytes-a-token-forever", generated: 8, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: megabyte[:MaxReplyBytesPerToken], Tokens: 1}, i < 1<<16
		}},
		{name: "zero-token-pieces", generated: 8, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: megabyte[:1024], Tokens: 0}, i < 1024
		}},
		{name: "negative-token-pieces", generated: 8, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: megabyte[:1024], Tokens: -1000}, i < 1024
		}},
		{name: "more-tokens-than-max", generated: 1000, piece: func(i int) (infer.Piece, bool) {
			return word(i), i < 1000
		}},
		{name: "one-piece-many-tokens", generated: 1 << 20, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: megabyte, Tokens: 1 << 20}, i < 1
		}},
		{name: "final-claims-more", generated: 1 << 30, piece: func(i int) (infer.Piece, bool) {
			return word(i), i < 8
		}},
		{name: "logprobs-per-token", generated: 8, logprobs: true, piece: func(i int) (infer.Piece, bool) {
			p := word(i)
			p.Logprobs = make([]infer.TokenLogprob, 1000)
			return p, i < 8
		}},
		{name: "unasked-logprobs", generated: 8, piece: func(i int) (infer.Piece, bool) {
			p := word(i)
			p.Logprobs = []infer.TokenLogprob{{Token: " w"}}
			return p, i < 8
		}},
		{name: "huge-logprob-token", generated: 8, logprobs: true, piece: func(i int) (infer.Piece, bool) {
			p := word(i)
			p.Logprobs = []infer.TokenLogprob{{Token: megabyte}}
			return p, i < 8
		}},
	}
}

// TestReplyBoundsCutHostileStreams: a serving peer's reply is held to the
// request (max_tokens 8 here): at most MaxTokens tokens in all, at least
// one token per piece, at most MaxReplyBytesPerToken bytes of text per
// token, at most one logprob per token (none unasked). A stream that
// breaks one is cut before the offending piece reaches the client, the
// peer loses trust and is cooled down, and the reply is finished locally:
// the client gets 8 tokens and at most 8 x 128 bytes. Before, the origin
// relayed everything (32 MB for the 1 MB pieces) and trusted the peer.
func TestReplyBoundsCutHostileStreams(t *testing.T) {
	for _, f := range floods() {
		t.Run(f.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, _, req := pair(t, func(*testPeer) Forwarder { return floodForwarder(f) })
				req.Sampling.Logprobs = f.logprobs
				var c collect
				res, err := a.router.Generate(t.Context(), req, c.emit)
				if err != nil {
					t.Fatal(err)
				}
				bytes := len(c.text())
				for _, p := range c.pieces {
					for _, lp := range p.Logprobs {
						bytes += len(lp.Token)
					}
				}
				rec := a.router.Recent()[0]
				t.Logf("%s: client got %d tokens, %d bytes (%d pieces, %d from the peer); attempts %+v",
					f.name, c.tokens(), bytes, len(c.pieces), rec.Attempts[0].Pieces, rec.Attempts)
				if c.tokens() > 8 || res.GeneratedTokens > 8 {
					t.Errorf("client got %d tokens, result says %d; max_tokens 8", c.tokens(), res.GeneratedTokens)
				}
				if limit := 8 * MaxReplyBytesPerToken; bytes > limit {
					t.Errorf("client got %d bytes; bound %d", bytes, limit)
				}
				nlp := 0
				for _, p := range c.pieces {
					nlp += len(p.Logprobs)
				}
				if nlp > c.tokens() {
					t.Errorf("client got %d logprobs for %d tokens", nlp, c.tokens())
				}
				if out := rec.Attempts[0].Outcome; out != "violation" {
					t.Errorf("attempt outcome %q, want violation", out)
				}
				now := time.Now()
				if v := a.router.Trust().Get("B", now); v >= 1 {
					t.Errorf("trust in the peer %v after a hostile stream, want < 1", v)
				}
				if st := a.router.Mesh().Peers(now); st[0].CooldownReason != "failure" {
					t.Errorf("peer not cooled down: %+v", st[0])
				}
			})
		})
	}
}

// TestReplyBoundsWithoutMaxTokens: a request without max_tokens is held
// to the room left in the context.
func TestReplyBoundsWithoutMaxTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := flood{name: "endless", generated: 1 << 20, piece: func(i int) (infer.Piece, bool) {
			return infer.Piece{Text: " w", Tokens: 1}, i < 1<<16
		}}
		a, _, req := pair(t, func(*testPeer) Forwarder { return floodForwarder(f) })
		req.Sampling.MaxTokens = 0
		var c collect
		if _, err := a.router.Generate(t.Context(), req, c.emit); err != nil {
			t.Fatal(err)
		}
		room := a.router.Info().ContextLength - len(req.Prompt)
		t.Logf("endless stream without max_tokens: client got %d tokens (%d pieces from the peer), room %d",
			c.tokens(), a.router.Recent()[0].Attempts[0].Pieces, room)
		if c.tokens() > room {
			t.Fatalf("client got %d tokens, the context has room for %d", c.tokens(), room)
		}
		if v := a.router.Trust().Get("B", time.Now()); v >= 1 {
			t.Fatalf("trust %v after an endless stream", v)
		}
	})
}

// TestReplyBoundsConstrained: a constrained reply whose stream is cut
// after some pieces cannot be continued (see continueLocal): the request
// fails, and the client has only the pieces within bounds.
func TestReplyBoundsConstrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f flood
		for _, g := range floods() {
			if g.name == "more-tokens-than-max" {
				f = g
			}
		}
		a, _, req := pair(t, func(*testPeer) Forwarder { return floodForwarder(f) })
		req.Sampling.Constraint = &infer.Constraint{JSONSchema: `{"type":"object"}`}
		var c collect
		if _, err := a.router.Generate(t.Context(), req, c.emit); !errors.Is(err, infer.ErrEngine) {
			t.Fatalf("err %v, want ErrEngine", err)
		}
		if c.tokens() != 8 {
			t.Fatalf("client got %d tokens, want the 8 within bounds", c.tokens())
		}
	})
}

// TestReplyBoundsAcceptHonestStreams: what honest engines send passes:
// the sim engine's reply with a trailing zero-token piece (held-back text
// of a stop string that never matched, flushed at the end), and a piece
// accounting for several tokens at once (the llama engine holds tokens
// while a stop string may still match).
func TestReplyBoundsAcceptHonestStreams(t *testing.T) {
	honest := []flood{
		{name: "flush", generated: 8, piece: func(i int) (infer.Piece, bool) {
			if i == 8 {
				return infer.Piece{Text: " St"}, true
			}
			return infer.Piece{Text: " w", Tokens: 1}, i < 8
		}},
		{name: "held-tokens", generated: 8, logprobs: true, piece: func(i int) (infer.Piece, bool) {
			lp := make([]infer.TokenLogprob, 4)
			return infer.Piece{Text: " two words", Tokens: 4, Logprobs: lp}, i < 2
		}},
	}
	for _, f := range honest {
		t.Run(f.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, _, req := pair(t, func(*testPeer) Forwarder { return floodForwarder(f) })
				req.Sampling.Logprobs = f.logprobs
				var c collect
				if _, err := a.router.Generate(t.Context(), req, c.emit); err != nil {
					t.Fatal(err)
				}
				rec := a.router.Recent()[0]
				if rec.ServedBy != "B" || rec.Continued {
					t.Fatalf("honest stream not served by the peer: %+v", rec)
				}
				if v := a.router.Trust().Get("B", time.Now()); v < 1 {
					t.Fatalf("trust %v after an honest stream", v)
				}
			})
		})
	}
}
