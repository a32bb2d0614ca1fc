package node

import "time"

// PeerID names a peer of the mesh: the string form of its libp2p peer ID
// (node never parses it).
type PeerID string

// Route is what Decide needs to know of a request.
type Route struct {
	// PromptTokens is the prompt's length in tokens.
	PromptTokens int
	// MaxTokens bounds the reply; 0 means "until the context is full", for
	// which Policy.AssumedReplyTokens is assumed.
	MaxTokens int
}

// View is everything a peer knows, at one instant, that bears on where a
// request should run. Mesh.View builds it; Decide reads it. A View is a
// plain value owned by its caller.
type View struct {
	// Now is the instant the view describes; Decide compares cooldowns
	// with it and never reads a clock.
	Now time.Time
	// Local is this peer's own engine.
	Local LocalView
	// Peers are the other peers serving the same model, in any order.
	Peers []PeerView
}

// LocalView is the local engine's state for one request.
type LocalView struct {
	// Cached is the exact number of leading prompt tokens the local KV
	// cache holds.
	Cached int
	// QueueDepth is the requests waiting for a slot; Active those holding
	// one; Slots the engine's parallel sequences.
	QueueDepth, Active, Slots int
	// PrefillTokPerSec and DecodeTokPerSec are the local engine's measured
	// speeds (0: not measured yet; Policy's assumed speeds stand in).
	PrefillTokPerSec, DecodeTokPerSec float64
}

// PeerView is what this peer knows of another one for one request.
type PeerView struct {
	ID PeerID
	// EstimatedCached is how many leading prompt tokens the peer's digest
	// says it holds (whole blocks), and EstimateAge how old that digest
	// state is.
	EstimatedCached int
	EstimateAge     time.Duration
	// Gap reports that the peer's replica missed a change (a snapshot is
	// being pulled): the estimate is discounted as though it were
	// Policy.EstimateGrace old at least.
	Gap bool
	// RTT is the measured round-trip time; RTTKnown is false before the
	// first measurement.
	RTT      time.Duration
	RTTKnown bool
	// QueueDepth, Active and Slots are the peer's last announced load
	// (Slots 0: no load heard).
	QueueDepth, Active, Slots int
	// PushBack is set when the peer announced it refuses forwarded work.
	PushBack bool
	// PrefillTokPerSec and DecodeTokPerSec are the peer's advertised speeds
	// (0: unknown; the local speeds stand in).
	PrefillTokPerSec, DecodeTokPerSec float64
	// LoadAge is how old the load announcement is.
	LoadAge time.Duration
	// Relayed is set when the only connection to the peer goes through a
	// circuit relay.
	Relayed bool
	// CooldownUntil: the peer is skipped before this instant (it answered
	// busy or failed recently).
	CooldownUntil time.Time
	// Failures counts the peer's consecutive failures.
	Failures int
}
