package p2p

import (
	"net"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The model topics are low-rate: each peer publishes about one digest delta
// per served request (a few per second at most), one load announcement every
// few seconds and a snapshot every ~30 s. Score parameters that count
// deliveries per time window (P3, mesh message deliveries, and its failure
// penalty P3b) would punish honest peers of a quiet topic, so they are off;
// the score rests on invalid messages (P4), which the validator produces,
// plus small positive credit for time in mesh (P1) and first deliveries
// (P2), and the router's behaviour penalty (P7).

// scoreThresholds returns the thresholds. With the weights below, one
// invalid message takes a peer to -10 (no more gossip to or from it), three
// to -90 (graylisted: its messages are dropped unread); the counter decays
// to near zero in 10 minutes, so a peer that stops misbehaving recovers.
func scoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:   -10, // below: no IHAVE/IWANT exchange with the peer
		PublishThreshold:  -50, // below: our own messages are not flooded to it
		GraylistThreshold: -80, // below: its RPCs are ignored
		// PX (peer exchange on prune) is accepted only from peers that have
		// earned credit by delivering messages first for a while.
		AcceptPXThreshold: 10,
		// Opportunistic grafting when the mesh's median score is below 1:
		// replaces a mesh of idle or misbehaving peers with better ones.
		OpportunisticGraftThreshold: 1,
	}
}

// scoreParams returns the peer-level score parameters; app is the
// application score (nil: 0).
func scoreParams(app func(peer.ID) float64) *pubsub.PeerScoreParams {
	if app == nil {
		app = func(peer.ID) float64 { return 0 }
	}
	return &pubsub.PeerScoreParams{
		Topics:        map[string]*pubsub.TopicScoreParams{},
		TopicScoreCap: 50, // positive topic credit is capped: misbehaviour always shows
		// P5: the node's trust and membership (GossipOptions.AppScore);
		// with the thresholds below, -10 stops gossip with the peer, -50
		// publishing to it, -80 graylists it.
		AppSpecificScore:  app,
		AppSpecificWeight: 1,
		// P6: more than 8 peers from one IP cost (n-8)^2 each; loopback is
		// exempt (tests and several peers on one machine).
		IPColocationFactorWeight:    -1,
		IPColocationFactorThreshold: 8,
		IPColocationFactorWhitelist: []*net.IPNet{
			{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)},
			{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
		},
		// P7: router misbehaviour (grafting during backoff, broken IWANT
		// promises) beyond 6 events costs the square of the excess.
		BehaviourPenaltyWeight:    -1,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:             time.Second,
		DecayToZero:               0.01,
		RetainScore:               10 * time.Minute, // a reconnecting peer keeps its penalty
	}
}

// topicScoreParams returns the score parameters of one model topic.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight: 1,
		// P1: +0.1 a minute in the mesh, up to +6 after an hour.
		TimeInMeshWeight:  0.1,
		TimeInMeshQuantum: time.Minute,
		TimeInMeshCap:     60,
		// P2: +1 per message first delivered by the peer, at most +20,
		// decaying over 10 minutes (a low-rate topic earns slowly).
		FirstMessageDeliveriesWeight: 1,
		FirstMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:    20,
		// P3 and P3b off: delivery-rate expectations do not fit a quiet topic.
		MeshMessageDeliveriesWeight: 0,
		MeshFailurePenaltyWeight:    0,
		// P4: -10 x (invalid messages)^2; the count decays over 10 minutes.
		InvalidMessageDeliveriesWeight: -10,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(10 * time.Minute),
	}
}
