package node

import (
	"sync"

	"github.com/meshllm/meshllm/infer"
)

// Speeds measures the local engine's prefill and decode speeds as
// exponentially weighted moving averages over served requests. The router
// feeds it every local result; the router's LocalView and the announcer's
// Load read it.
//
// Speeds is safe for concurrent use (one mutex).
type Speeds struct {
	alpha float64

	mu              sync.Mutex
	prefill, decode float64
}

// Samples smaller than these are not measured: a prefill of a few tokens is
// dominated by its fixed per-request cost, and one decoded token has no
// decode step of its own.
const (
	minPrefillSample = 32 // uncached prompt tokens
	minDecodeSample  = 4  // generated tokens
)

// DefaultSpeedAlpha weighs each new sample by 0.2: about the last ten
// requests count.
const DefaultSpeedAlpha = 0.2

// NewSpeeds returns a meter with weight alpha for new samples (0 means
// DefaultSpeedAlpha) and the given starting speeds (0: unknown until the
// first sample).
func NewSpeeds(alpha, prefill, decode float64) *Speeds {
	if alpha <= 0 || alpha > 1 {
		alpha = DefaultSpeedAlpha
	}
	return &Speeds{alpha: alpha, prefill: prefill, decode: decode}
}

// Observe folds a served request's measured speeds in. Results too small
// to measure a speed (see minPrefillSample) leave it unchanged.
func (s *Speeds) Observe(res *infer.Result) {
	if res == nil {
		return
	}
	var pf, dc float64
	if res.PromptTokens-res.CachedTokens >= minPrefillSample {
		pf = res.PrefillTokensPerSecond()
	}
	if res.GeneratedTokens >= minDecodeSample {
		dc = res.DecodeTokensPerSecond()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefill = ewma(s.prefill, pf, s.alpha)
	s.decode = ewma(s.decode, dc, s.alpha)
}

// Get returns the current speeds in tokens per second (0: not measured).
func (s *Speeds) Get() (prefill, decode float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prefill, s.decode
}

func ewma(old, sample, alpha float64) float64 {
	switch {
	case sample <= 0:
		return old
	case old <= 0:
		return sample
	}
	return old + alpha*(sample-old)
}
