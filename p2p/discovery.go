package p2p

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// ModelNamespace is the DHT rendezvous namespace of the peers serving
// modelID.
func ModelNamespace(modelID string) string { return "meshllm/model/" + modelID }

// ParseBootstrapPeers parses full multiaddrs (each must end in
// /p2p/PEERID) and groups them by peer.
func ParseBootstrapPeers(addrs []string) ([]peer.AddrInfo, error) {
	mas := make([]ma.Multiaddr, 0, len(addrs))
	for _, s := range addrs {
		s = strings.TrimSpace(s)
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("p2p: bootstrap address %q: %w", s, err)
		}
		if _, err := m.ValueForProtocol(ma.P_P2P); err != nil {
			return nil, fmt.Errorf("p2p: bootstrap address %q has no /p2p/PEERID part", s)
		}
		mas = append(mas, m)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("p2p: bootstrap addresses: %w", err)
	}
	return infos, nil
}

// Bootstrapped returns a channel closed once the host has connected to a
// bootstrap peer (at once when none is configured).
func (h *Host) Bootstrapped() <-chan struct{} { return h.bootstrapped }

func (h *Host) markBootstrapped() {
	h.bootstrappedOnce.Do(func() { close(h.bootstrapped) })
}

// backoff is a capped exponential backoff with +-25% jitter, so that many
// peers restarted together do not dial in lockstep.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return time.Duration(float64(d) * (0.75 + 0.5*rand.Float64()))
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// bootstrapLoop keeps the peer joined: while fewer than BootstrapMinPeers
// peers are connected, it dials the bootstrap peers it is not connected
// to, backing off after rounds with no success; after the first success
// it refreshes the DHT routing table so lookups work at once.
func (h *Host) bootstrapLoop(ctx context.Context) {
	if len(h.bootstrap) == 0 {
		return
	}
	bo := backoff{min: h.cfg.BootstrapRetryMin, max: h.cfg.BootstrapRetryMax}
	for {
		wait := h.cfg.BootstrapCheckInterval
		if len(h.h.Network().Peers()) < h.cfg.BootstrapMinPeers || !h.connectedToBootstrap() {
			// This loop has its own backoff; the swarm's (5 s and up
			// after a failed dial) would delay a join by that much once
			// the bootstrap peer is back.
			if sw, ok := h.h.Network().(interface{ Backoff() *swarm.DialBackoff }); ok {
				for _, pi := range h.bootstrap {
					sw.Backoff().Clear(pi.ID)
				}
			}
			n := h.connectAll(ctx, h.bootstrap)
			if h.connectedToBootstrap() {
				bo.reset()
				if n > 0 {
					h.log.Info("connected to bootstrap peers", "new", n)
					h.dht.RefreshRoutingTable()
				}
				h.markBootstrapped()
			} else {
				wait = bo.next()
				h.log.Debug("bootstrap peers unreachable", "retry_in", wait)
			}
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// connectedToBootstrap reports whether any bootstrap peer is connected.
func (h *Host) connectedToBootstrap() bool {
	for _, pi := range h.bootstrap {
		if h.h.Network().Connectedness(pi.ID) == network.Connected {
			return true
		}
	}
	return false
}

// connectAll dials, in parallel, the peers of infos that are neither self
// nor connected, and returns how many new connections succeeded.
func (h *Host) connectAll(ctx context.Context, infos []peer.AddrInfo) int {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		n  int
	)
	sem := make(chan struct{}, 16)
	for _, pi := range infos {
		if pi.ID == h.h.ID() || h.h.Network().Connectedness(pi.ID) == network.Connected {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := h.connect(ctx, pi); err != nil {
				h.log.Debug("dial failed", "to", pi.ID, "err", err)
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n
}

// connect dials pi within DialTimeout.
func (h *Host) connect(ctx context.Context, pi peer.AddrInfo) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.DialTimeout)
	defer cancel()
	return h.h.Connect(ctx, pi)
}

// lifetime returns a context that ends with ctx or at Close.
func (h *Host) lifetime(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Advertise announces in the DHT, until ctx ends or the Host closes, that
// this peer is in namespace ns (ModelNamespace). It returns at once; the
// announcement runs in the background and is renewed at 7/8 of
// AdvertiseTTL. A failed announcement (a fresh peer's routing table is
// still empty) is retried after AdvertiseRetryMin, doubling up to
// AdvertiseRetryMax, instead of the 2 minutes of libp2p's helper.
func (h *Host) Advertise(ctx context.Context, ns string) error {
	if !h.goRun(func(context.Context) {
		ctx, cancel := h.lifetime(ctx)
		defer cancel()
		h.advertiseLoop(ctx, ns)
	}) {
		return ErrClosed
	}
	return nil
}

func (h *Host) advertiseLoop(ctx context.Context, ns string) {
	bo := backoff{min: h.cfg.AdvertiseRetryMin, max: h.cfg.AdvertiseRetryMax}
	for {
		var wait time.Duration
		ttl, err := h.disc.Advertise(ctx, ns, discovery.TTL(h.cfg.AdvertiseTTL))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = bo.next()
			h.log.Debug("advertise failed", "ns", ns, "err", err, "retry_in", wait)
		} else {
			bo.reset()
			wait = 7 * ttl / 8
			h.log.Debug("advertised", "ns", ns, "ttl", ttl)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// FindPeers looks up the peers advertising ns in the DHT, once, and
// returns them (never this peer). It returns when the lookup ends or ctx
// does; peers found by then are returned with ctx's error.
func (h *Host) FindPeers(ctx context.Context, ns string) ([]peer.AddrInfo, error) {
	ctx, cancel := h.lifetime(ctx)
	defer cancel()
	ch, err := h.disc.FindPeers(ctx, ns)
	if err != nil {
		return nil, err
	}
	var out []peer.AddrInfo
	for pi := range ch {
		if pi.ID != h.h.ID() {
			out = append(out, pi)
		}
	}
	return out, ctx.Err()
}

// JoinNamespace advertises this peer in ns and, until ctx ends or the
// Host closes, looks up the other peers of ns and connects to those not
// connected yet: every DiscoveryInterval, and with the advertise backoff
// while lookups find nobody (a mesh that is just forming). It dials no
// more than the connection manager's low water allows, a random choice of
// the peers found, so that a big mesh does not churn connections the
// manager would trim again.
func (h *Host) JoinNamespace(ctx context.Context, ns string) error {
	if err := h.Advertise(ctx, ns); err != nil {
		return err
	}
	if !h.goRun(func(context.Context) {
		ctx, cancel := h.lifetime(ctx)
		defer cancel()
		h.discoverLoop(ctx, ns)
	}) {
		return ErrClosed
	}
	return nil
}

// dialBudget returns the peers of found that are not connected, in random
// order, at most as many as keep the connection count at low water.
func (h *Host) dialBudget(found []peer.AddrInfo) []peer.AddrInfo {
	var fresh []peer.AddrInfo
	for _, pi := range found {
		if h.h.Network().Connectedness(pi.ID) != network.Connected {
			fresh = append(fresh, pi)
		}
	}
	room := max(h.cfg.ConnLowWater-len(h.h.Network().Peers()), 0)
	if len(fresh) <= room {
		return fresh
	}
	rand.Shuffle(len(fresh), func(i, j int) { fresh[i], fresh[j] = fresh[j], fresh[i] })
	return fresh[:room]
}

func (h *Host) discoverLoop(ctx context.Context, ns string) {
	bo := backoff{min: h.cfg.AdvertiseRetryMin, max: h.cfg.DiscoveryInterval}
	for {
		lctx, cancel := context.WithTimeout(ctx, h.cfg.DiscoveryInterval)
		found, err := h.FindPeers(lctx, ns)
		cancel()
		if ctx.Err() != nil {
			return
		}
		n := h.connectAll(ctx, h.dialBudget(found))
		wait := h.cfg.DiscoveryInterval
		if len(found) == 0 {
			wait = bo.next()
		} else {
			bo.reset()
		}
		h.log.Debug("namespace lookup", "ns", ns, "found", len(found), "new", n, "err", err, "next_in", wait)
		if !sleep(ctx, wait) {
			return
		}
	}
}
