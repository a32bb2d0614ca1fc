package node

import (
	"fmt"
	"time"
)

// Policy holds the router's tunables: the cost model's assumptions, the
// forwarding margins, how stale knowledge is discounted, and the push-back
// and failure back-offs. DefaultPolicy returns the values meshllm ships
// with, one comment per field saying why; WANPolicy adjusts them for peers
// spread over the Internet.
//
// A Policy is a plain value: copy it freely. Decide only reads it.
type Policy struct {
	// MinSaving is the absolute margin: forward only when the best peer's
	// expected completion is at least this much earlier than local's.
	MinSaving time.Duration
	// MinSavingFraction is the relative margin: the saving must also be at
	// least this fraction of local's expected completion.
	MinSavingFraction float64

	// StreamRoundTrips is how many round trips the router charges a
	// forwarded request before its first token can come back. The wire
	// costs one on a connected, identified peer (measured on real libp2p
	// QUIC streams in testnet/vtmesh: 400 ms of network time over 200 ms
	// links, first stream included: the stream opens and negotiates
	// lazily); the default charges two, and the second is margin: with one,
	// the paper scenario's sweep forwards too eagerly (Zipf at 50 ms 0.123
	// s instead of 0.105, and slower than local at 1000 ms), because what
	// Decide does not see — the forward's effect on queues and caches —
	// costs more than the round trip it saves (docs/results.md).
	StreamRoundTrips int
	// Bandwidth is the assumed bytes per second of a direct link, used for
	// the prompt's transfer (4 bytes a token) and the reply's (ReplyBytes a
	// token).
	Bandwidth float64
	// RelayBandwidth is the assumed bytes per second through a circuit relay.
	RelayBandwidth float64
	// RequestOverheadBytes is the request frame's size apart from its tokens
	// (model name, sampling parameters, framing).
	RequestOverheadBytes int
	// ReplyBytesPerToken is the bytes a generated token costs on the wire
	// (its text plus the piece frame).
	ReplyBytesPerToken int
	// UnknownRTT is the RTT assumed for a peer whose RTT was never measured;
	// 0 excludes such peers from forwarding.
	UnknownRTT time.Duration

	// AssumedPrefillTokPerSec and AssumedDecodeTokPerSec stand in for a
	// speed nobody measured yet (the local engine before its first request,
	// a peer that advertises 0).
	AssumedPrefillTokPerSec float64
	AssumedDecodeTokPerSec  float64
	// AssumedReplyTokens is the reply length assumed for a request without
	// MaxTokens (which means "until the context is full").
	AssumedReplyTokens int

	// EstimateGrace is how old a peer's cache estimate may be before it is
	// discounted at all; it should cover the announcer's snapshot period
	// (unchanged caches send no deltas, so a quiet peer's age grows until
	// its next snapshot).
	EstimateGrace time.Duration
	// EstimateHorizon is how long after EstimateGrace an estimate takes to
	// shrink linearly to zero cached tokens.
	EstimateHorizon time.Duration
	// LoadTTL is how old a peer's load announcement may be; older (or
	// never heard) -> the peer is not a candidate.
	LoadTTL time.Duration

	// BusyQueueThreshold is the queue depth at which a peer advertises
	// push-back; above it, ServeForwarded refuses with infer.ErrBusy.
	BusyQueueThreshold int
	// PushBackCooldown is how long a peer that answered busy is skipped.
	PushBackCooldown time.Duration
	// FailureCooldown is how long a peer that failed (every failure but
	// busy: error, timeout, reset, refusal of a request the origin serves,
	// a reply out of bounds) is skipped after its first consecutive
	// failure; each further consecutive failure doubles it, up to
	// MaxFailureCooldown.
	FailureCooldown    time.Duration
	MaxFailureCooldown time.Duration
	// MaxFallbacks bounds the peers tried after the first one before the
	// request is served locally.
	MaxFallbacks int

	// FirstPieceTimeout bounds the wait for a forwarded request's first
	// piece beyond its expected time to first token (so a peer that hangs
	// costs at most this much extra before the request falls back).
	FirstPieceTimeout time.Duration
	// StallTimeout bounds the gap between two pieces of a forwarded stream
	// beyond the expected decode step.
	StallTimeout time.Duration

	// VerifyFraction is the fraction of completed forwarded replies the
	// origin spot-checks against its own model in the background (verified
	// answers, verify.go); 0 turns checks off.
	VerifyFraction float64
}

// DefaultPolicy returns the policy for peers on one LAN or in one data
// centre.
func DefaultPolicy() Policy {
	return Policy{
		// 20 ms is below what a user notices and above the jitter of a
		// measured RTT on a LAN; it keeps near-ties local, which keeps load
		// spread and avoids flapping between equal peers.
		MinSaving: 20 * time.Millisecond,
		// 10%: the estimate is an estimate (block-granular matches, speeds
		// as EWMAs); a saving smaller than its own error is noise.
		MinSavingFraction: 0.10,
		StreamRoundTrips:  2,
		// 10 Mbit/s: a volunteer desktop's uplink, the slow end of links
		// meshllm is meant for. A 1,000-token prompt costs 3 ms at it.
		Bandwidth: 1.25e6,
		// Circuit relays are shared and rate-limited: assume 1 Mbit/s.
		RelayBandwidth:       125e3,
		RequestOverheadBytes: 512,
		ReplyBytesPerToken:   16,
		// Unmeasured links are excluded: forwarding over an unknown link
		// is the paper's losing bet.
		UnknownRTT: 0,
		// A 0.5B model on two CPU cores (docs/sim.md): ~100 prefill tok/s,
		// ~8 decode tok/s.
		AssumedPrefillTokPerSec: 100,
		AssumedDecodeTokPerSec:  8,
		AssumedReplyTokens:      256,
		// Announcers send a snapshot every 10 s by default; 15 s of grace
		// covers one lost snapshot's jitter, and 60 s of decay lets an
		// estimate fade well before the peer's load would expire anyway.
		EstimateGrace:   15 * time.Second,
		EstimateHorizon: 60 * time.Second,
		// Loads are announced every second; 10 missed announcements mean
		// the peer is gone or partitioned.
		LoadTTL: 10 * time.Second,
		// 4 waiting requests: on a 4-slot engine that is one full round of
		// work queued; beyond it a new request waits longer than it would
		// anywhere idle.
		BusyQueueThreshold: 4,
		// Long enough for a queue of a few requests to drain, short enough
		// that a specialist is not abandoned for long.
		PushBackCooldown:   5 * time.Second,
		FailureCooldown:    2 * time.Second,
		MaxFailureCooldown: time.Minute,
		MaxFallbacks:       2,
		FirstPieceTimeout:  5 * time.Second,
		StallTimeout:       5 * time.Second,
		// One reply in 20: a liar is caught within about 20 forwards
		// (with probability 1-1/e after 20, 99.4% after 100), and the
		// origin spends a prefill of the reply on 5% of its forwards
		// (docs/security.md, "Verified answers").
		VerifyFraction: 0.05,
	}
}

// WANPolicy returns the policy for peers spread over the Internet: larger
// absolute margin (RTT jitter of tens of milliseconds), slower assumed
// links, and longer timeouts.
func WANPolicy() Policy {
	p := DefaultPolicy()
	p.MinSaving = 100 * time.Millisecond
	p.Bandwidth = 625e3 // 5 Mbit/s
	p.RelayBandwidth = 62.5e3
	p.FirstPieceTimeout = 10 * time.Second
	p.StallTimeout = 10 * time.Second
	return p
}

// Validate reports the first field of p out of range.
func (p Policy) Validate() error {
	switch {
	case p.MinSaving < 0:
		return fmt.Errorf("node: Policy.MinSaving %v < 0", p.MinSaving)
	case p.MinSavingFraction < 0 || p.MinSavingFraction >= 1:
		return fmt.Errorf("node: Policy.MinSavingFraction %g out of [0, 1)", p.MinSavingFraction)
	case p.StreamRoundTrips < 1:
		return fmt.Errorf("node: Policy.StreamRoundTrips %d < 1", p.StreamRoundTrips)
	case p.Bandwidth <= 0 || p.RelayBandwidth <= 0:
		return fmt.Errorf("node: Policy bandwidths must be > 0")
	case p.RequestOverheadBytes < 0 || p.ReplyBytesPerToken < 0:
		return fmt.Errorf("node: Policy byte sizes must be >= 0")
	case p.UnknownRTT < 0:
		return fmt.Errorf("node: Policy.UnknownRTT %v < 0", p.UnknownRTT)
	case p.AssumedPrefillTokPerSec <= 0 || p.AssumedDecodeTokPerSec <= 0:
		return fmt.Errorf("node: Policy assumed speeds must be > 0")
	case p.AssumedReplyTokens < 1:
		return fmt.Errorf("node: Policy.AssumedReplyTokens %d < 1", p.AssumedReplyTokens)
	case p.EstimateGrace < 0 || p.EstimateHorizon <= 0:
		return fmt.Errorf("node: Policy.EstimateGrace must be >= 0 and EstimateHorizon > 0")
	case p.LoadTTL <= 0:
		return fmt.Errorf("node: Policy.LoadTTL %v <= 0", p.LoadTTL)
	case p.BusyQueueThreshold < 0:
		return fmt.Errorf("node: Policy.BusyQueueThreshold %d < 0", p.BusyQueueThreshold)
	case p.PushBackCooldown < 0 || p.FailureCooldown < 0 || p.MaxFailureCooldown < p.FailureCooldown:
		return fmt.Errorf("node: Policy cooldowns must be >= 0 and MaxFailureCooldown >= FailureCooldown")
	case p.MaxFallbacks < 0:
		return fmt.Errorf("node: Policy.MaxFallbacks %d < 0", p.MaxFallbacks)
	case p.FirstPieceTimeout <= 0 || p.StallTimeout <= 0:
		return fmt.Errorf("node: Policy timeouts must be > 0")
	case !(p.VerifyFraction >= 0 && p.VerifyFraction <= 1):
		return fmt.Errorf("node: Policy.VerifyFraction %g out of [0, 1]", p.VerifyFraction)
	}
	return nil
}

// failureCooldown is the cooldown after n consecutive failures (n >= 1).
func (p Policy) failureCooldown(n int) time.Duration {
	d := p.FailureCooldown
	for i := 1; i < n && d < p.MaxFailureCooldown; i++ {
		d *= 2
	}
	return min(d, p.MaxFailureCooldown)
}

// MaxReplyBytesPerToken bounds the text a serving peer may stream back per
// generated token, summed over its reply (so one long token among short
// ones costs nothing: only the average counts), and the text of each
// logprob entry. Generated text averages about 4 bytes a token in the BPE
// and SentencePiece vocabularies meshllm serves; the wire already cuts a
// logprob's token text at the same 128 bytes (p2p.MaxLogprobTokenLen). A
// reply of max_tokens 8 is therefore at most 1 KiB of text from a peer,
// however much it sends (see replyBounds).
const MaxReplyBytesPerToken = 128
