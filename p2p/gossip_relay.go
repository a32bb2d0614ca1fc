package p2p

import (
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Defaults of the relay quota (GossipOptions).
const (
	// DefaultMaxRelayedStrangers: distinct non-member authors one relay may
	// forward per window before it is penalized. An honest relay forwards
	// only authors of the topic, and a mesh below the view's limit (128
	// peers) never makes it forward this many authors we lack.
	DefaultMaxRelayedStrangers = 128
	// DefaultRelayWindow is the quota's window.
	DefaultRelayWindow = time.Minute
	// DefaultRelayPenalty is subtracted from an over-quota relay's
	// application score for one window: below the graylist threshold
	// (-80), so its RPCs are dropped before any signature is checked.
	DefaultRelayPenalty = 100.0
)

// member reports whether author may have its messages delivered: this host
// itself, or a peer this host is connected to (directly or over a relay
// circuit) that is subscribed to the topic. The connectedness check comes
// first: it is a map lookup, and it turns away every made-up identity;
// the topic's peer list is asked only of connected peers.
//
// It runs in pubsub's validation workers; Topic.ListPeers goes through
// pubsub's event loop, which never waits on the workers.
func (t *Topic) member(author peer.ID) bool {
	if author == t.self {
		return true
	}
	switch t.g.h.Network().Connectedness(author) {
	case network.Connected, network.Limited:
	default:
		return false
	}
	return slices.Contains(t.topic.ListPeers(), author)
}

// relayQuota counts, per relaying peer (pubsub's ReceivedFrom), the
// distinct authors it forwarded that are not members (see Topic.member) in
// a window; past the quota it is penalized until a window after its last
// excess. It holds at most maxRelays relays (the longest quiet dropped
// first) and quota+1 authors a relay. Safe for concurrent use: Score is
// called from GossipSub's scoring with its lock held, so it only takes
// the quota's own mutex.
type relayQuota struct {
	quota     int
	window    time.Duration
	penalty   float64
	maxRelays int
	now       func() time.Time

	mu     sync.Mutex
	relays map[peer.ID]*relayCount
}

type relayCount struct {
	start   time.Time // the window's start
	authors map[peer.ID]struct{}
	until   time.Time // penalized until
	last    time.Time // last stranger forwarded
}

func newRelayQuota(o GossipOptions) *relayQuota {
	return &relayQuota{quota: o.MaxRelayedStrangers, window: o.RelayWindow, penalty: o.RelayPenalty,
		maxRelays: o.MaxAuthors, now: o.Now, relays: map[peer.ID]*relayCount{}}
}

// stranger records that relay forwarded a message of author, a non-member,
// and reports whether relay is now over its quota.
func (q *relayQuota) stranger(relay, author peer.ID) bool {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	c, ok := q.relays[relay]
	if !ok {
		q.makeRoom(now)
		c = &relayCount{start: now, authors: map[peer.ID]struct{}{}}
		q.relays[relay] = c
	}
	if now.Sub(c.start) >= q.window {
		c.start = now
		clear(c.authors)
	}
	c.last = now
	if len(c.authors) <= q.quota {
		c.authors[author] = struct{}{}
	}
	if len(c.authors) > q.quota {
		c.until = now.Add(q.window)
	}
	return now.Before(c.until)
}

// makeRoom drops relays when the map is full: first those neither
// counting in a current window nor penalized, else the longest quiet.
// q.mu must be held.
func (q *relayQuota) makeRoom(now time.Time) {
	if len(q.relays) < q.maxRelays {
		return
	}
	var quiet peer.ID
	var quietAt time.Time
	for id, c := range q.relays {
		if now.Sub(c.start) >= q.window && !now.Before(c.until) {
			delete(q.relays, id)
			continue
		}
		if quiet == "" || c.last.Before(quietAt) {
			quiet, quietAt = id, c.last
		}
	}
	if len(q.relays) >= q.maxRelays {
		delete(q.relays, quiet)
	}
}

// Score is relay's part of the application score: -penalty while it is
// over quota, else 0.
func (q *relayQuota) Score(relay peer.ID) float64 {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if c, ok := q.relays[relay]; ok && now.Before(c.until) {
		return -q.penalty
	}
	return 0
}

// Throttled reports whether relay is over its quota now.
func (q *relayQuota) Throttled(relay peer.ID) bool { return q.Score(relay) < 0 }
