package p2p

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// maxConcurrentPings bounds the pings of one round in flight at once.
const maxConcurrentPings = 16

// pinger measures round trips to every connected peer with libp2p ping
// (/ipfs/ping/1.0.0) and feeds an RTTEstimator. Its loop is the only
// goroutine that calls round, so rounds never overlap.
type pinger struct {
	h   host.Host
	est *RTTEstimator
	cfg RTTConfig
	log *slog.Logger
}

// run pings a round every PingInterval until ctx ends.
func (p *pinger) run(ctx context.Context) {
	if p.cfg.PingInterval <= 0 {
		return
	}
	t := time.NewTicker(p.cfg.PingInterval)
	defer t.Stop()
	for {
		p.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round pings every connected peer once (a burst of PingBurst pings) and
// returns when all have answered or timed out.
func (p *pinger) round(ctx context.Context) {
	sem := make(chan struct{}, maxConcurrentPings)
	var wg sync.WaitGroup
	for _, id := range p.h.Network().Peers() {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// A peer that left during the round was just forgotten;
			// do not bring it back.
			if d, ok := p.measure(ctx, id); ok && p.h.Network().Connectedness(id) != network.NotConnected {
				p.est.Observe(id, d)
			}
		}()
	}
	wg.Wait()
}

// measure returns the smallest round trip of a burst of pings to id.
func (p *pinger) measure(ctx context.Context, id peer.ID) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PingTimeout)
	defer cancel()
	// Measure open connections only; never dial a peer that just left.
	ctx = network.WithNoDial(ctx, "rtt ping")
	burst := max(p.cfg.PingBurst, 1)
	var best time.Duration
	got := 0
	for res := range ping.Ping(ctx, p.h, id) {
		if res.Error != nil {
			p.log.Debug("ping failed", "peer", id, "err", res.Error)
			break
		}
		if got == 0 || res.RTT < best {
			best = res.RTT
		}
		got++
		if got == burst {
			break
		}
	}
	return best, got > 0
}
