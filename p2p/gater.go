package p2p

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// maxBlocked bounds the peers a Gater blocks at once; beyond it the block
// that ends first is dropped.
const maxBlocked = 4096

// Gater is the host's connection gater (Config.ConnectionGater): it
// refuses connections to and from peers outside an optional allowlist and
// from peers blocked for a while (the membership handshake blocks the
// ones that fail it).
//
// The allowlist is checked when dialing and, for inbound connections,
// once the security handshake has authenticated the remote peer ID
// (InterceptSecured): after Noise or TLS on TCP, after the TLS handshake
// on QUIC, so it works for both transports alike, unlike a pnet
// pre-shared key, which libp2p does not support with QUIC.
//
// Gater is safe for concurrent use; libp2p calls it from many goroutines.
type Gater struct {
	now func() time.Time

	mu      sync.RWMutex
	allow   map[peer.ID]struct{} // nil: every peer may connect
	blocked map[peer.ID]time.Time

	refused atomic.Int64
}

var _ interface {
	InterceptPeerDial(peer.ID) bool
	InterceptAddrDial(peer.ID, ma.Multiaddr) bool
	InterceptAccept(network.ConnMultiaddrs) bool
	InterceptSecured(network.Direction, peer.ID, network.ConnMultiaddrs) bool
	InterceptUpgraded(network.Conn) (bool, control.DisconnectReason)
} = (*Gater)(nil)

// NewGater returns a gater that admits only the peers in allow, or every
// peer when allow is nil (blocking still works). An empty non-nil allow
// admits nobody.
func NewGater(allow []peer.ID) *Gater {
	g := &Gater{now: time.Now, blocked: map[peer.ID]time.Time{}}
	if allow != nil {
		g.allow = make(map[peer.ID]struct{}, len(allow))
		for _, p := range allow {
			g.allow[p] = struct{}{}
		}
	}
	return g
}

// ParseAllowlist decodes peer IDs (their string form, as `meshllm join`
// prints them) for NewGater.
func ParseAllowlist(ids []string) ([]peer.ID, error) {
	out := make([]peer.ID, 0, len(ids))
	for _, s := range ids {
		p, err := peer.Decode(s)
		if err != nil {
			return nil, fmt.Errorf("p2p: allowlist entry %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Allow adds p to the allowlist (no-op for an open gater).
func (g *Gater) Allow(p peer.ID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.allow != nil {
		g.allow[p] = struct{}{}
	}
}

// Listed reports whether p is on the allowlist, or the gater has none.
func (g *Gater) Listed(p peer.ID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.allow == nil {
		return true
	}
	_, ok := g.allow[p]
	return ok
}

// Block refuses p's connections for d.
func (g *Gater) Block(p peer.ID, d time.Duration) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.blocked) >= maxBlocked {
		var first peer.ID
		var end time.Time
		for id, until := range g.blocked {
			if !until.After(now) {
				delete(g.blocked, id)
				continue
			}
			if end.IsZero() || until.Before(end) {
				first, end = id, until
			}
		}
		if len(g.blocked) >= maxBlocked {
			delete(g.blocked, first)
		}
	}
	g.blocked[p] = later(g.blocked[p], now.Add(d))
}

// Allowed reports whether p may connect now: listed and not blocked.
func (g *Gater) Allowed(p peer.ID) bool {
	now := g.now()
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.allow != nil {
		if _, ok := g.allow[p]; !ok {
			return false
		}
	}
	until, ok := g.blocked[p]
	return !ok || !now.Before(until)
}

// Refused counts the connections the gater refused.
func (g *Gater) Refused() int64 { return g.refused.Load() }

func (g *Gater) check(p peer.ID) bool {
	if g.Allowed(p) {
		return true
	}
	g.refused.Add(1)
	return false
}

// InterceptPeerDial implements connmgr.ConnectionGater.
func (g *Gater) InterceptPeerDial(p peer.ID) bool { return g.check(p) }

// InterceptAddrDial implements connmgr.ConnectionGater.
func (g *Gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.Allowed(p) }

// InterceptAccept implements connmgr.ConnectionGater: the remote's peer ID
// is not known yet, so every connection proceeds to the security
// handshake.
func (g *Gater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured implements connmgr.ConnectionGater: the remote's peer
// ID is authenticated here.
func (g *Gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return g.check(p)
}

// InterceptUpgraded implements connmgr.ConnectionGater.
func (g *Gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
