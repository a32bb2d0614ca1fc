package p2p

import (
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// ProtocolLimit caps the inbound streams of one protocol in libp2p's
// resource manager. A stream beyond a cap is reset right after protocol
// negotiation, before any handler runs, so no goroutine or buffer of
// ours is spent on it. Zero fields keep libp2p's scaled default.
type ProtocolLimit struct {
	// Streams caps the protocol's inbound streams over all peers;
	// StreamsPerPeer those of one peer.
	Streams        int
	StreamsPerPeer int
}

// DefaultProtocolLimits returns the resource-manager caps of meshllm's
// protocols. They sit above the services' own limits, which answer with a
// busy frame first (a polite refusal the origin reacts to), and are the
// hard backstop against a peer that opens streams faster than it reads
// the answers.
func DefaultProtocolLimits() map[protocol.ID]ProtocolLimit {
	return map[protocol.ID]ProtocolLimit{
		// Twice InferServiceOptions' defaults (64 in all, 8 a peer): each
		// inbound stream may hold a request frame of up to DefaultMaxFrame
		// while it is read, so these bound that memory too.
		InferProtocol: {Streams: 128, StreamsPerPeer: 16},
		// Snapshot pulls are one short stream per gap or new epoch.
		SnapshotProtocol: {Streams: 64, StreamsPerPeer: 4},
		// The membership handshake is one stream per connection.
		MemberProtocol: {Streams: 64, StreamsPerPeer: 4},
	}
}

// applyProtocolLimits writes limits (nil: DefaultProtocolLimits) into
// partial's protocol and protocol-peer scopes.
func applyProtocolLimits(partial *rcmgr.PartialLimitConfig, limits map[protocol.ID]ProtocolLimit) {
	if limits == nil {
		limits = DefaultProtocolLimits()
	}
	for id, l := range limits {
		if partial.Protocol == nil {
			partial.Protocol = map[protocol.ID]rcmgr.ResourceLimits{}
		}
		if partial.ProtocolPeer == nil {
			partial.ProtocolPeer = map[protocol.ID]rcmgr.ResourceLimits{}
		}
		if l.Streams > 0 {
			pl := partial.Protocol[id]
			pl.StreamsInbound = rcmgr.LimitVal(l.Streams)
			pl.Streams = rcmgr.LimitVal(2 * l.Streams) // outbound ones are ours
			partial.Protocol[id] = pl
		}
		if l.StreamsPerPeer > 0 {
			pl := partial.ProtocolPeer[id]
			pl.StreamsInbound = rcmgr.LimitVal(l.StreamsPerPeer)
			pl.Streams = rcmgr.LimitVal(2 * l.StreamsPerPeer)
			partial.ProtocolPeer[id] = pl
		}
	}
}
