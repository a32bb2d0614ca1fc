package uitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/node/dashboard"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/prometheus/client_golang/prometheus"
)

// bus is an in-memory mesh: it delivers each peer's announcements to
// every other peer's Mesh (pulling a snapshot when a replica asks for one)
// and forwards requests to the target's ServeForwarded, as the p2p layer
// does over GossipSub and streams. Safe for concurrent use.
type bus struct {
	mu    sync.Mutex
	peers map[node.PeerID]*peer
	rtt   map[[2]node.PeerID]time.Duration
}

// peer is one peer of the test mesh with its HTTP API and dashboard.
type peer struct {
	id     node.PeerID
	bus    *bus
	eng    *sim.Engine
	router *node.Router
	ann    *node.Announce
	dash   *dashboard.Dashboard
	url    string // the API's base URL
}

func newBus() *bus {
	return &bus{peers: map[node.PeerID]*peer{}, rtt: map[[2]node.PeerID]time.Duration{}}
}

// link sets the round-trip time between a and b.
func (b *bus) link(a, c node.PeerID, rtt time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rtt[[2]node.PeerID{a, c}] = rtt
	b.rtt[[2]node.PeerID{c, a}] = rtt
}

func (b *bus) others(self node.PeerID) []*peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*peer
	for id, p := range b.peers {
		if id != self {
			out = append(out, p)
		}
	}
	return out
}

// rttFrom is one peer's RTTSource over the bus's links.
type rttFrom struct {
	b    *bus
	self node.PeerID
}

func (r rttFrom) RTT(to node.PeerID) (time.Duration, bool) {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	d, ok := r.b.rtt[[2]node.PeerID{r.self, to}]
	return d, ok
}

func (p *peer) PublishDigest(d *cache.Digest) error {
	for _, o := range p.bus.others(p.id) {
		need, err := o.router.Mesh().ApplyDigest(p.id, d, time.Now())
		if err != nil {
			return err
		}
		if need {
			if _, err := o.router.Mesh().ApplyDigest(p.id, p.ann.Snapshot(), time.Now()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *peer) PublishLoad(l node.Load) error {
	for _, o := range p.bus.others(p.id) {
		o.router.Mesh().ApplyLoad(p.id, l, time.Now())
	}
	return nil
}

func (p *peer) Forward(ctx context.Context, to node.PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	p.bus.mu.Lock()
	q, ok := p.bus.peers[to]
	p.bus.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to %s", to)
	}
	return q.router.ServeForwarded(ctx, req, emit)
}

// add starts a peer: engine, mesh, router, announce loop, dashboard loop
// and HTTP API, all stopped when the test ends. label names cached
// prefixes on its dashboard.
func (b *bus) add(t *testing.T, ctx context.Context, id node.PeerID, label func([]int32) string) *peer {
	t.Helper()
	prof, _ := sim.Preset("tiny")
	eng, err := sim.New(prof)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	p := &peer{id: id, bus: b, eng: eng}
	info := eng.Info()
	policy := node.DefaultPolicy()
	mesh, err := node.NewMesh(node.MeshConfig{Self: id, Model: info.ID, ModelName: info.Name, RTT: rttFrom{b, id}, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	// Seeded with the tiny profile's speeds, as a peer seeds its meter
	// from a calibration.
	speeds := node.NewSpeeds(0, 1000, 500)
	reg := prometheus.NewRegistry()
	if p.router, err = node.NewRouter(node.RouterConfig{Engine: eng, Mesh: mesh, Forwarder: p, Speeds: speeds, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	src, err := cache.NewSource(cache.SourceConfig{Peer: string(id), Model: info.ID, Epoch: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	if p.ann, err = node.NewAnnounce(node.AnnounceConfig{Cache: eng, Stats: eng, Source: src, Publish: p,
		Speeds: speeds, Policy: policy, Interval: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if p.dash, err = dashboard.New(dashboard.Config{Router: p.router, Registry: reg,
		HotPrefixes: dashboard.HotPrefixes(eng, 5, label), Interval: 250 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.NewServer(httpapi.DefaultConfig(), p.router, httpapi.WithRegistry(reg), httpapi.WithDashboard(p.dash.Handler()),
		httpapi.WithRoute("GET /v1/mesh", p.router.MeshHandler()), httpapi.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	p.url = hs.URL

	loops, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.ann.Run(loops) })
	wg.Go(func() { p.dash.Run(loops) })
	t.Cleanup(func() {
		stop() // ends the dashboard's event streams first, so Close does not wait on them
		wg.Wait()
		hs.Close()
	})

	b.mu.Lock()
	b.peers[id] = p
	b.mu.Unlock()
	return p
}
