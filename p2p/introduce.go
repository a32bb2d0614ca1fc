package p2p

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Bounds of Host.Introduce.
const (
	// introduceInFlight is how many introductions may dial at once; more
	// are dropped (the author's next relayed message asks again).
	introduceInFlight = 4
	// introduceBackoff is how long an author is not tried again after an
	// attempt, found or not.
	introduceBackoff = 30 * time.Second
	// introduceTimeout bounds one lookup and dial.
	introduceTimeout = 10 * time.Second
	// introduceStaleAfter: a connection older than this to an author that
	// still is not on the topic is taken for a dead one (a partition that
	// no FIN crossed, a peer restarted with the same identity) and
	// replaced; a younger one may just not have announced its topics yet.
	introduceStaleAfter = 10 * time.Second
	// introduceMemory is how many authors' backoffs are remembered; past
	// it the table is cleared (a flood of made-up identities then costs
	// at most introduceInFlight lookups at a time).
	introduceMemory = 1024
)

// introducer is Host.Introduce's state: the dials in flight and each
// author's last attempt. Safe for concurrent use.
type introducer struct {
	sem chan struct{}

	mu    sync.Mutex
	tried map[peer.ID]time.Time
}

// Introduce asks the host to connect to p, a peer a connected member
// relayed gossip from: it looks p up in the DHT and dials it, in the
// background. At most introduceInFlight run at once, each author at most
// once per introduceBackoff; calls beyond that return at once. It never
// blocks, so it may be GossipOptions.Introduce. Safe for concurrent use.
//
// Gossip asks for authors it does not count as members: not connected, or
// connected but not on the topic. A connection older than
// introduceStaleAfter in the second case is closed and dialed again: the
// old one is dead or belongs to the author's previous process, whose
// topics went with it.
func (h *Host) Introduce(p peer.ID) {
	in := h.intro
	if in == nil || p == h.h.ID() {
		return
	}
	now := time.Now()
	stale := false
	if h.h.Network().Connectedness(p) == network.Connected {
		for _, c := range h.h.Network().ConnsToPeer(p) {
			if now.Sub(c.Stat().Opened) < introduceStaleAfter {
				return // young: its subscriptions may still be on the way
			}
		}
		stale = true
	}
	in.mu.Lock()
	if last, ok := in.tried[p]; ok && now.Sub(last) < introduceBackoff {
		in.mu.Unlock()
		return
	}
	if len(in.tried) >= introduceMemory {
		clear(in.tried)
	}
	in.tried[p] = now
	in.mu.Unlock()
	select {
	case in.sem <- struct{}{}:
	default:
		return
	}
	started := h.goRun(func(hctx context.Context) {
		defer func() { <-in.sem }()
		ctx, cancel := context.WithTimeout(hctx, introduceTimeout)
		defer cancel()
		if stale {
			_ = h.h.Network().ClosePeer(p)
		}
		info := peer.AddrInfo{ID: p, Addrs: h.h.Peerstore().Addrs(p)}
		if len(info.Addrs) == 0 && h.dht != nil {
			found, err := h.dht.FindPeer(ctx, p)
			if err != nil {
				return
			}
			info = found
		}
		_ = h.h.Connect(ctx, info)
	})
	if !started {
		<-in.sem
	}
}
