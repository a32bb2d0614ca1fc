package p2p

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// maxConcurrentPings bounds the pings of one round in flight at once.
const maxConcurrentPings = 16

// pinger measures round trips to every connected peer with libp2p ping
// (/ipfs/ping/1.0.0) and feeds an RTTEstimator: a round over all peers
// every PingInterval, and one measurement of each peer as soon as it
// connects — the router does not forward to a peer whose RTT was never
// measured, so without it a peer that joined just after a round would wait
// a whole interval before it could be sent work. Its loop is the only
// goroutine that calls round, so rounds never overlap; sem bounds the pings
// in flight, rounds and connections together.
type pinger struct {
	h   host.Host
	est *RTTEstimator
	cfg RTTConfig
	log *slog.Logger
	sem chan struct{}
}

// RunPinger pings every peer connected to h each cfg.PingInterval, and
// each peer as it connects, and feeds est, until ctx ends; it returns at
// once when PingInterval is 0. A Host runs it on its own host; RunPinger is
// for hosts built elsewhere (the virtual-time testnet's simulated hosts).
// Call it on its own goroutine.
func RunPinger(ctx context.Context, h host.Host, est *RTTEstimator, cfg RTTConfig, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	newPinger(h, est, cfg, log).run(ctx)
}

func newPinger(h host.Host, est *RTTEstimator, cfg RTTConfig, log *slog.Logger) *pinger {
	return &pinger{h: h, est: est, cfg: cfg, log: log, sem: make(chan struct{}, maxConcurrentPings)}
}

// run pings a round every PingInterval, and each newly connected peer at
// once, until ctx ends.
func (p *pinger) run(ctx context.Context) {
	if p.cfg.PingInterval <= 0 {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sub, err := p.h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.BufSize(peerEventBuffer), eventbus.Name("meshllm-rtt"))
	if err != nil {
		p.log.Warn("rtt: no connection events; new peers wait for the next round", "err", err)
	} else {
		defer sub.Close() // before wg.Wait: it ends onConnect's loop
		wg.Add(1)
		go func() { defer wg.Done(); p.onConnect(ctx, sub.Out(), &wg) }()
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

// onConnect measures each peer that connects, until events closes. A
// connection that finds every ping slot taken is left to the next round:
// the event bus must never wait for this loop.
func (p *pinger) onConnect(ctx context.Context, events <-chan any, wg *sync.WaitGroup) {
	for e := range events {
		if ev := toPeerEvent(e); !ev.Connected || ctx.Err() != nil {
			continue
		}
		select {
		case p.sem <- struct{}{}:
		default:
			continue
		}
		id := e.(event.EvtPeerConnectednessChanged).Peer
		wg.Add(1)
		go func() {
			defer func() { <-p.sem; wg.Done() }()
			p.observe(ctx, id)
		}()
	}
}

// round pings every connected peer once (a burst of PingBurst pings) and
// returns when all have answered or timed out.
func (p *pinger) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, id := range p.h.Network().Peers() {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-p.sem; wg.Done() }()
			p.observe(ctx, id)
		}()
	}
	wg.Wait()
}

// observe measures id and records the sample, unless id left meanwhile (it
// was just forgotten; do not bring it back).
func (p *pinger) observe(ctx context.Context, id peer.ID) {
	if d, ok := p.measure(ctx, id); ok && p.h.Network().Connectedness(id) != network.NotConnected {
		p.est.Observe(id, d)
	}
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
