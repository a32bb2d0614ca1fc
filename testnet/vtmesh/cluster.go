package vtmesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
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
// Cluster owns them, and replaces them when the peer restarts.
type Peer struct {
	Host   host.Host
	Engine *sim.Engine
	Gossip *p2p.Gossip
	Mesh   *node.Mesh
	Router *node.Router
	// RTT is the peer's own round-trip estimator, fed by libp2p pings and
	// stream timings as in a p2p.Host.
	RTT *p2p.RTTEstimator

	cancel  context.CancelFunc // stops the peer's loops
	wg      sync.WaitGroup     // the peer's loops
	closers []func() error     // its services, in closing order
	engines []*sim.Engine      // every engine it ran (a restart starts a new one)
}

// Cluster is a running virtual-time mesh.
type Cluster struct {
	cfg   Config
	net   *simnet.Simnet
	link  simnet.NodeBiDiLinkSettings
	keys  []crypto.PrivKey
	index map[node.PeerID]int

	mu     sync.Mutex // guards peers' replacement and up
	peers  []*Peer
	up     []bool
	epochs []uint64
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
	c := &Cluster{
		cfg:   cfg,
		net:   &simnet.Simnet{LatencyFunc: simnet.StaticLatency(cfg.Link)},
		link:  simnet.NodeBiDiLinkSettings{Downlink: simnet.LinkSettings{BitsPerSecond: bits}, Uplink: simnet.LinkSettings{BitsPerSecond: bits}},
		index: map[node.PeerID]int{}, peers: make([]*Peer, cfg.Peers),
		up: make([]bool, cfg.Peers), epochs: make([]uint64, cfg.Peers),
	}
	c.net.Start()
	// Identities from a fixed seed: equal configs give equal peer IDs, so
	// every ID-ordered choice repeats run to run.
	seed := rand.New(rand.NewChaCha8([32]byte{'v', 't', 'm', 'e', 's', 'h'}))
	for i := range cfg.Peers {
		priv, _, err := crypto.GenerateEd25519Key(readerFunc(func(b []byte) (int, error) {
			for j := range b {
				b[j] = byte(seed.Uint32())
			}
			return len(b), nil
		}))
		if err != nil {
			return nil, err
		}
		id, _ := peer.IDFromPrivateKey(priv)
		c.keys = append(c.keys, priv)
		c.index[node.PeerID(id.String())] = i
	}
	for i := range cfg.Peers {
		if err := c.start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	time.Sleep(cfg.Warmup)
	return c, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// Peers returns the cluster's peers, in index order (a restarted peer's
// entry is replaced).
func (c *Cluster) Peers() []*Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Peer(nil), c.peers...)
}

// start brings peer i up: a host on its simulated address with its
// identity, a fresh engine and cache epoch, connected to every live peer.
func (c *Cluster) start(i int) error {
	addr := fmt.Sprintf("/ip4/%s/udp/8000/quic-v1", simnet.IntToPublicIPv4(i))
	h, err := libp2p.New(
		libp2p.Identity(c.keys[i]),
		libp2p.ListenAddrStrings(addr),
		simlibp2p.QUICSimnet(c.net, c.link),
		libp2p.DisableIdentifyAddressDiscovery(), // stalls synctest (x/simlibp2p)
		libp2p.ResourceManager(&network.NullResourceManager{}),
	)
	if err != nil {
		return fmt.Errorf("vtmesh: host %d: %w", i, err)
	}
	c.mu.Lock()
	c.epochs[i]++
	epoch := c.epochs[i]
	c.mu.Unlock()
	p, err := c.newPeer(h, epoch)
	if err != nil {
		h.Close()
		return err
	}
	c.mu.Lock()
	if old := c.peers[i]; old != nil {
		p.engines = append(old.engines, p.engines...)
	}
	c.peers[i] = p
	var live []host.Host
	for j, q := range c.peers {
		if j != i && c.up[j] {
			live = append(live, q.Host)
		}
	}
	c.up[i] = true
	c.mu.Unlock()
	for _, b := range live {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := h.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()})
		cancel()
		if err != nil {
			return fmt.Errorf("vtmesh: connect: %w", err)
		}
	}
	return nil
}

// stop takes peer i off the network: its loops end, its services and host
// close (connections drop, streams to it reset), and no new request enters
// at it. Requests it is serving for its own clients finish on its engine.
func (c *Cluster) stop(i int) error {
	c.mu.Lock()
	p := c.peers[i]
	wasUp := c.up[i]
	c.up[i] = false
	c.mu.Unlock()
	if !wasUp {
		return nil
	}
	return p.shutdown()
}

// shutdown stops p's loops and closes its services and host; its engines
// stay open for the requests still on them.
func (p *Peer) shutdown() error {
	p.cancel()
	p.wg.Wait()
	var errs []error
	for _, f := range p.closers {
		errs = append(errs, f())
	}
	return errors.Join(append(errs, p.Host.Close())...)
}

// newPeer wires one peer around h the way `meshllm join` does (see
// cmd/meshllm/peer.go), minus discovery and the HTTP API.
func (c *Cluster) newPeer(h host.Host, epoch uint64) (*Peer, error) {
	cfg := c.cfg
	eng, err := sim.NewWithOptions(cfg.Profile, sim.Options{Running: cfg.Running})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Peer{Host: h, Engine: eng, cancel: cancel, engines: []*sim.Engine{eng}}
	fail := func(err error) (*Peer, error) {
		cancel()
		for _, f := range p.closers {
			f()
		}
		eng.Close()
		return nil, err
	}
	info := eng.Info()
	self := node.PeerID(h.ID().String())

	rcfg := p2p.DefaultRTTConfig()
	rcfg.PingInterval = cfg.PingInterval
	p.RTT = p2p.NewRTTEstimator(rcfg)

	trust := &wire.GossipTrust{} // set once the router exists
	p.Gossip, err = p2p.NewGossip(ctx, h, p2p.GossipOptions{AppScore: trust.Score})
	if err != nil {
		return fail(err)
	}
	p.closers = append(p.closers, p.Gossip.Close)
	topic, err := p.Gossip.Join(info.ID)
	if err != nil {
		return fail(err)
	}
	p.Mesh, err = node.NewMesh(node.MeshConfig{Self: self, Model: info.ID, ModelName: info.Name,
		RTT: wire.RTTSource{RTTs: p.RTT, Limited: wire.LimitedTracker(h)}, Policy: cfg.Node})
	if err != nil {
		return fail(err)
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
		return fail(err)
	}
	trust.Set(p.Router.Trust())
	svc := p2p.NewInferService(h, p2p.LimitHandler(wire.ServeForwarded(p.Router, info.ID), p2p.DefaultRateLimits()),
		p2p.InferServiceOptions{})
	p.closers = append([]func() error{svc.Close}, p.closers...)

	source, err := cache.NewSource(cache.SourceConfig{Peer: string(self), Model: info.ID, Epoch: epoch})
	if err != nil {
		return fail(err)
	}
	ann, err := node.NewAnnounce(node.AnnounceConfig{
		Cache: eng, Stats: eng, Source: source, Speeds: speeds, Policy: cfg.Node,
		Interval: cfg.Announce, SnapshotEvery: cfg.SnapshotEvery,
		Publish: wire.Announcer{Topic: topic, Self: h.ID(), Epoch: epoch},
	})
	if err != nil {
		return fail(err)
	}
	snaps := p2p.NewSnapshotService(h, wire.SnapshotProvider(ann, info.ID))
	p.closers = append([]func() error{snaps.Close}, p.closers...)
	peers, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		return fail(err)
	}

	run := func(f func()) { p.wg.Add(1); go func() { defer p.wg.Done(); f() }() }
	run(func() { ann.Run(ctx) })
	run(func() { wire.ReceiveGossip(ctx, topic, p.Mesh) })
	run(func() { wire.PullSnapshots(ctx, h, p.Mesh, info.ID, 0) })
	run(func() { p2p.RunPinger(ctx, h, p.RTT, rcfg, slog.New(slog.DiscardHandler)) })
	run(func() { watchPeers(ctx, peers, p) })
	return p, nil
}

// watchPeers forgets a peer that disconnects, as `meshllm join` does: its
// replica and load leave the mesh view, its RTT the estimator.
func watchPeers(ctx context.Context, sub event.Subscription, p *Peer) {
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-sub.Out():
			if ev := e.(event.EvtPeerConnectednessChanged); ev.Connectedness == network.NotConnected {
				p.Mesh.PeerDown(node.PeerID(ev.Peer.String()))
				p.RTT.Forget(ev.Peer)
			}
		}
	}
}

// Close stops every peer, closes the hosts, the engines and the network,
// and waits for the cluster's goroutines.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	peers := append([]*Peer(nil), c.peers...)
	up := append([]bool(nil), c.up...)
	c.mu.Unlock()
	var errs []error
	for i, p := range peers {
		if p == nil {
			continue
		}
		if up[i] {
			errs = append(errs, p.shutdown())
		}
		for _, e := range p.engines {
			errs = append(errs, e.Close())
		}
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
