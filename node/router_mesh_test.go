package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
)

// memBus is an in-memory mesh for tests: it delivers each peer's
// announcements to every other peer's Mesh (pulling a snapshot when a
// replica asks for one) and forwards requests to the target's
// ServeForwarded, as the p2p layer does over GossipSub and streams.
type memBus struct {
	mu    sync.Mutex
	nodes map[PeerID]*memNode
}

type memNode struct {
	id     PeerID
	eng    *sim.Engine
	router *Router
	ann    *Announce
	bus    *memBus
}

func (b *memBus) others(self PeerID) []*memNode {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*memNode
	for id, n := range b.nodes {
		if id != self {
			out = append(out, n)
		}
	}
	return out
}

func (n *memNode) PublishDigest(d *cache.Digest) error {
	for _, o := range n.bus.others(n.id) {
		need, err := o.router.Mesh().ApplyDigest(n.id, d, time.Now())
		if err != nil {
			return err
		}
		if need {
			if _, err := o.router.Mesh().ApplyDigest(n.id, n.ann.Snapshot(), time.Now()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *memNode) PublishLoad(l Load) error {
	for _, o := range n.bus.others(n.id) {
		o.router.Mesh().ApplyLoad(n.id, l, time.Now())
	}
	return nil
}

func (n *memNode) Forward(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	n.bus.mu.Lock()
	to, ok := n.bus.nodes[peer]
	n.bus.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no route to %s", peer)
	}
	return to.router.ServeForwarded(ctx, req, emit)
}

func (b *memBus) add(t *testing.T, id PeerID) *memNode {
	return b.addWith(t, id, func(n *memNode) Forwarder { return n })
}

// addWith is add with the node's Forwarder chosen by fwd.
func (b *memBus) addWith(t *testing.T, id PeerID, fwd func(*memNode) Forwarder) *memNode {
	t.Helper()
	n := &memNode{id: id, eng: newSimEngine(t), bus: b}
	info := n.eng.Info()
	mesh, err := NewMesh(MeshConfig{Self: id, Model: info.ID, RTT: fixedRTT(time.Millisecond), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	// Seeded with the tiny profile's speeds, as a peer seeds its meter
	// from a calibration; unseeded, a peer assumes it is a slow CPU
	// (Policy.AssumedPrefillTokPerSec) and sends even cold prompts to
	// measured, faster peers until it has measured itself.
	speeds := NewSpeeds(0, 1000, 500)
	if n.router, err = NewRouter(RouterConfig{Engine: n.eng, Mesh: mesh, Forwarder: fwd(n), Speeds: speeds}); err != nil {
		t.Fatal(err)
	}
	src, err := cache.NewSource(cache.SourceConfig{Peer: string(id), Model: info.ID, Epoch: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	if n.ann, err = NewAnnounce(AnnounceConfig{Cache: n.eng, Stats: n.eng, Source: src, Publish: n,
		Speeds: speeds, Policy: DefaultPolicy()}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.nodes[id] = n
	b.mu.Unlock()
	return n
}

// TestMeshOfRouters runs three peers over memBus in virtual time: a prefix
// warmed on B is announced, and the same-prefix request sent to A is
// served by B from its cache; a different prompt stays on A.
func TestMeshOfRouters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := &memBus{nodes: map[PeerID]*memNode{}}
		a, b, c := bus.add(t, "A"), bus.add(t, "B"), bus.add(t, "C")
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, n := range []*memNode{a, b, c} {
			wg.Go(func() { n.ann.Run(ctx) })
		}
		defer func() { cancel(); wg.Wait() }()

		shared := prompt(11, 560)
		q := func(i int) infer.Request {
			return infer.Request{Prompt: append(append([]int32{}, shared...), prompt(100+i, 40)...), Sampling: infer.Sampling{MaxTokens: 8}}
		}
		if _, err := b.router.Generate(ctx, q(0), func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // an announce interval
		synctest.Wait()

		res, err := a.router.Generate(ctx, q(1), func(infer.Piece) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		rec := a.router.Recent()[0]
		if rec.ServedBy != "B" || res.CachedTokens < 544 || rec.EstimatedCached != 560 {
			t.Fatalf("A's request: %+v, result %+v", rec, res)
		}
		if c.eng.Stats().ServedTotal != 0 || a.eng.Stats().ServedTotal != 0 {
			t.Fatal("served by the wrong peer")
		}
		// A prompt nobody holds stays on A.
		if _, err := a.router.Generate(ctx, infer.Request{Prompt: prompt(12, 600), Sampling: infer.Sampling{MaxTokens: 8}},
			func(infer.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if rec := a.router.Recent()[1]; rec.ServedBy != "" || !(rec.Reason == ReasonLocal || rec.Reason == ReasonNoPeers) {
			t.Fatalf("cold prompt: %+v", rec)
		}
		// C learned of both A's and B's caches and loads.
		st := c.router.Mesh().Peers(time.Now())
		if len(st) != 2 || st[0].Load == nil || st[1].DigestBlocks == 0 {
			t.Fatalf("C sees %+v", st)
		}
	})
}
