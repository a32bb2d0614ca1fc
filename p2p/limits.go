package p2p

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// RateLimits bounds what one remote peer may ask of this one over the
// infer protocol, per second; DefaultRateLimits returns the defaults. A
// zero rate turns that limit off.
type RateLimits struct {
	// RequestsPerSec and RequestBurst: a token bucket of requests per
	// peer.
	RequestsPerSec float64
	RequestBurst   float64
	// PromptTokensPerSec and PromptTokenBurst: a token bucket of prompt
	// tokens per peer. A request is admitted while the bucket is positive
	// and then takes its whole prompt, so the bucket may go into debt: a
	// prompt larger than the burst is served (once the bucket is full) and
	// the peer waits until the debt is paid off.
	PromptTokensPerSec float64
	PromptTokenBurst   float64
	// MaxPeers bounds the peers whose buckets are kept; beyond it the
	// bucket idle longest is dropped (a full bucket carries no state).
	MaxPeers int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultRateLimits returns the per-peer limits a volunteer peer applies.
func DefaultRateLimits() RateLimits {
	return RateLimits{
		// 4 requests a second, bursts of 16: one origin's users rarely
		// send more, and the node's own queue threshold refuses long
		// before an engine could serve that many.
		RequestsPerSec: 4,
		RequestBurst:   16,
		// 8k prompt tokens a second, bursts of 32k: several times what a
		// CPU peer prefills (~100 tok/s uncached) but cached prefixes are
		// cheap; a flood of long prompts is cut to this rate per peer.
		PromptTokensPerSec: 8192,
		PromptTokenBurst:   32768,
		MaxPeers:           4096,
	}
}

// bucket is one token bucket: level tokens at time at.
type bucket struct {
	level float64
	at    time.Time
}

// refill brings b to now at rate, capped at burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.level = min(burst, b.level+dt*rate)
	}
	b.at = now
}

// wait is how long until the bucket holds need tokens at rate.
func (b *bucket) wait(need, rate float64) time.Duration {
	if b.level >= need || rate <= 0 {
		return 0
	}
	return time.Duration((need - b.level) / rate * float64(time.Second))
}

// peerBuckets are one peer's buckets.
type peerBuckets struct {
	reqs, toks bucket
}

// RateLimiter keeps the token buckets of every remote peer. It is safe
// for concurrent use (one mutex, held for a few arithmetic operations).
type RateLimiter struct {
	cfg   RateLimits
	mu    sync.Mutex
	peers map[peer.ID]*peerBuckets
}

// NewRateLimiter returns a limiter in which every peer starts with full
// buckets.
func NewRateLimiter(cfg RateLimits) *RateLimiter {
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &RateLimiter{cfg: cfg, peers: map[peer.ID]*peerBuckets{}}
}

// Admit charges one request of promptTokens to p's buckets and returns 0,
// or, when a bucket is empty, charges nothing and returns how long p
// should wait before asking again.
func (l *RateLimiter) Admit(p peer.ID, promptTokens int) time.Duration {
	c := &l.cfg
	now := c.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.peers[p]
	if !ok {
		l.evict()
		b = &peerBuckets{reqs: bucket{c.RequestBurst, now}, toks: bucket{c.PromptTokenBurst, now}}
		l.peers[p] = b
	}
	b.reqs.refill(now, c.RequestsPerSec, c.RequestBurst)
	b.toks.refill(now, c.PromptTokensPerSec, c.PromptTokenBurst)
	var wait time.Duration
	if c.RequestsPerSec > 0 {
		wait = b.reqs.wait(1, c.RequestsPerSec)
	}
	if c.PromptTokensPerSec > 0 {
		// Admitted while positive; the prompt may take it into debt.
		wait = max(wait, b.toks.wait(min(1, float64(promptTokens)), c.PromptTokensPerSec))
	}
	if wait > 0 {
		return wait
	}
	if c.RequestsPerSec > 0 {
		b.reqs.level--
	}
	if c.PromptTokensPerSec > 0 {
		b.toks.level -= float64(promptTokens)
	}
	return 0
}

// evict drops the peer whose buckets were touched longest ago when the
// map is full; l.mu must be held.
func (l *RateLimiter) evict() {
	if len(l.peers) < l.cfg.MaxPeers {
		return
	}
	var oldest peer.ID
	var at time.Time
	first := true
	for id, b := range l.peers {
		if t := b.reqs.at; first || t.Before(at) {
			oldest, at, first = id, t, false
		}
	}
	delete(l.peers, oldest)
}

// LimitHandler wraps an InferHandler with per-peer rate limits: a request
// beyond its peer's request or prompt-token rate is answered ErrBusy with
// RetryAfter set to when the peer's buckets allow it, without reaching h.
// The returned handler is safe for concurrent use as h is.
func LimitHandler(h InferHandler, cfg RateLimits) InferHandler {
	l := NewRateLimiter(cfg)
	return l.Wrap(h)
}

// Wrap returns h behind this limiter (see LimitHandler).
func (l *RateLimiter) Wrap(h InferHandler) InferHandler {
	return func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		if wait := l.Admit(from, len(req.Prompt)); wait > 0 {
			return nil, &InferError{Code: ErrBusy, RetryAfter: wait,
				Message: fmt.Sprintf("rate limit: retry in %v", wait.Round(time.Millisecond))}
		}
		return h(ctx, from, req, send)
	}
}
