package vtmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/x/simlibp2p"
	"github.com/marcopolo/simnet"
	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/cmd/meshllm/wire"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/p2p"
)

// Peer is one full peer of a Cluster. Its fields are for inspection; the
// Cluster owns them.
type Peer struct {
	Host   host.Host
	Engine *sim.Engine
	Gossip *p2p.Gossip
	Mesh   *node.Mesh
	Router *node.Router
	// RTT is the peer's own round-trip estimator, fed by libp2p pings and
	// stream timings as in a p2p.Host.
	RTT *p2p.RTTEstimator

	id      node.PeerID
	closers []func() error
}

// Cluster is a running virtual-time mesh.
type Cluster struct {
	cfg   Config
	net   *simnet.Simnet
	hosts []host.Host
	peers []*Peer
	index map[node.PeerID]int

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// Start builds cfg's cluster, connects every peer to every other and
// waits cfg.Warmup of virtual time. It must be called inside a synctest
// bubble (see the package doc).
func Start(cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	bits := int(cfg.Bandwidth * 8)
	link := simnet.NodeBiDiLinkSettings{
		Downlink: simnet.LinkSettings{BitsPerSecond: bits},
		Uplink:   simnet.LinkSettings{BitsPerSecond: bits},
	}
	nw, meta, err := simlibp2p.SimpleLibp2pNetwork(
		[]simlibp2p.NodeLinkSettingsAndCount{{LinkSettings: link, Count: cfg.Peers}},
		simnet.StaticLatency(cfg.Link), simlibp2p.NetworkSettings{})
	if err != nil {
		return nil, fmt.Errorf("vtmesh: network: %w", err)
	}
	nw.Start()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{cfg: cfg, net: nw, hosts: meta.Nodes, index: map[node.PeerID]int{}, cancel: cancel}
	for i, h := range meta.Nodes {
		c.index[node.PeerID(h.ID().String())] = i
	}
	for _, h := range meta.Nodes {
		p, err := c.startPeer(ctx, h)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.peers = append(c.peers, p)
	}
	for i, a := range meta.Nodes {
		for _, b := range meta.Nodes[i+1:] {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			err := a.Connect(cctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()})
			ccancel()
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("vtmesh: connect: %w", err)
			}
		}
	}
	time.Sleep(cfg.Warmup)
	return c, nil
}

// Peers returns the cluster's peers, in index order.
func (c *Cluster) Peers() []*Peer { return c.peers }

// startPeer wires one peer around h the way `meshllm join` does (see
// cmd/meshllm/peer.go), minus discovery and the HTTP API.
func (c *Cluster) startPeer(ctx context.Context, h host.Host) (*Peer, error) {
	cfg := c.cfg
	eng, err := sim.NewWithOptions(cfg.Profile, sim.Options{Running: cfg.Running})
	if err != nil {
		return nil, err
	}
	info := eng.Info()
	self := node.PeerID(h.ID().String())
	p := &Peer{Host: h, Engine: eng, id: self}

	rcfg := p2p.DefaultRTTConfig()
	rcfg.PingInterval = cfg.PingInterval
	p.RTT = p2p.NewRTTEstimator(rcfg)

	var trust *node.Trust
	p.Gossip, err = p2p.NewGossip(ctx, h, p2p.GossipOptions{AppScore: func(id peer.ID) float64 {
		if trust == nil {
			return 0
		}
		return trust.GossipScore(node.PeerID(id.String()))
	}})
	if err != nil {
		return nil, err
	}
	topic, err := p.Gossip.Join(info.ID)
	if err != nil {
		return nil, err
	}
	p.Mesh, err = node.NewMesh(node.MeshConfig{Self: self, Model: info.ID, ModelName: info.Name,
		RTT: wire.RTTSource{RTTs: p.RTT, Limited: wire.LimitedTracker(h)}, Policy: cfg.Node})
	if err != nil {
		return nil, err
	}
	speeds := node.NewSpeeds(0, 0, 0)
	rc := node.RouterConfig{Engine: eng, Mesh: p.Mesh, Speeds: speeds, Recent: 1,
		Logger: slog.New(slog.DiscardHandler)}
	if cfg.Forward {
		client := p2p.NewInferClient(h, p2p.InferClientOptions{Observe: p.RTT.Observe})
		rc.Forwarder = tracker{inner: wire.Forwarder{Client: client, Model: info.ID}, index: c.index}
	}
	p.Router, err = node.NewRouter(rc)
	if err != nil {
		return nil, err
	}
	trust = p.Router.Trust()
	svc := p2p.NewInferService(h, p2p.LimitHandler(wire.ServeForwarded(p.Router, info.ID), p2p.DefaultRateLimits()),
		p2p.InferServiceOptions{})

	source, err := cache.NewSource(cache.SourceConfig{Peer: string(self), Model: info.ID, Epoch: 1})
	if err != nil {
		return nil, err
	}
	ann, err := node.NewAnnounce(node.AnnounceConfig{
		Cache: eng, Stats: eng, Source: source, Speeds: speeds, Policy: cfg.Node,
		Interval: cfg.Announce, SnapshotEvery: cfg.SnapshotEvery,
		Publish: wire.Announcer{Topic: topic, Self: h.ID(), Epoch: 1},
	})
	if err != nil {
		return nil, err
	}
	snaps := p2p.NewSnapshotService(h, wire.SnapshotProvider(ann, info.ID))
	p.closers = []func() error{snaps.Close, svc.Close, p.Gossip.Close, eng.Close}

	run := func(f func()) { c.wg.Add(1); go func() { defer c.wg.Done(); f() }() }
	run(func() { ann.Run(ctx) })
	run(func() { wire.ReceiveGossip(ctx, topic, p.Mesh) })
	run(func() { wire.PullSnapshots(ctx, h, p.Mesh, info.ID, 0) })
	run(func() { p2p.RunPinger(ctx, h, p.RTT, rcfg, slog.New(slog.DiscardHandler)) })
	return p, nil
}

// Close stops every peer's loops, closes the hosts and the network, and
// waits for the cluster's goroutines.
func (c *Cluster) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.cancel()
	c.wg.Wait()
	var errs []error
	for _, p := range c.peers {
		for _, f := range p.closers {
			errs = append(errs, f())
		}
	}
	for _, h := range c.hosts {
		errs = append(errs, h.Close())
	}
	c.net.Close()
	return errors.Join(errs...)
}

// served records, per request, which peers the router tried and which one
// served it; the tracker finds it in the request's context.
type served struct {
	attempts int
	server   int // -1: served locally
}

type servedKey struct{}

// tracker wraps the real Forwarder to record where each request went.
type tracker struct {
	inner node.Forwarder
	index map[node.PeerID]int
}

func (t tracker) Forward(ctx context.Context, to node.PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	s, _ := ctx.Value(servedKey{}).(*served)
	if s != nil {
		s.attempts++
	}
	res, err := t.inner.Forward(ctx, to, req, est, emit)
	if err == nil && s != nil {
		s.server = t.index[to]
	}
	return res, err
}
