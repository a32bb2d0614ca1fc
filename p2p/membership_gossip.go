package p2p

import (
	"context"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PubSubOptions returns the GossipSub options that keep non-members out of
// the mesh's gossip; pass them in GossipOptions.PubSubOptions, and
// m.AppScore (or AppScores of it and the node's trust) as
// GossipOptions.AppScore:
//
//   - a default validator ignores every message relayed by a peer that is
//     not a member (the relay; the topic validator separately accepts only
//     authors this host is connected to and who are on the topic, see
//     gossip_relay.go);
//   - a peer filter keeps non-members out of topic meshes, gossip
//     (IHAVE/IWANT) and grafts; it is asked again at every heartbeat, so a
//     peer that proves membership later joins then.
func (m *Membership) PubSubOptions() []pubsub.Option {
	return []pubsub.Option{
		pubsub.WithDefaultValidator(func(_ context.Context, from peer.ID, _ *pubsub.Message) pubsub.ValidationResult {
			if m.IsMember(from) {
				return pubsub.ValidationAccept
			}
			return pubsub.ValidationIgnore
		}, pubsub.WithValidatorInline(true)),
		pubsub.WithPeerFilter(func(p peer.ID, _ string) bool { return m.IsMember(p) }),
	}
}

// AppScores sums application scores (membership, node trust) into one
// GossipOptions.AppScore; nil functions are skipped.
func AppScores(fs ...func(peer.ID) float64) func(peer.ID) float64 {
	return func(p peer.ID) float64 {
		s := 0.0
		for _, f := range fs {
			if f != nil {
				s += f(p)
			}
		}
		return s
	}
}
