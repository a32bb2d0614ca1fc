package dashboard

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
	"github.com/prometheus/client_golang/prometheus"
)

// testPeer is a router on a simulated engine, for the dashboard to show.
type testPeer struct {
	id     node.PeerID
	eng    *sim.Engine
	router *node.Router
	reg    *prometheus.Registry
}

type fixedRTT time.Duration

func (f fixedRTT) RTT(node.PeerID) (time.Duration, bool) { return time.Duration(f), true }

// forwardFunc adapts a function to node.Forwarder.
type forwardFunc func(ctx context.Context, peer node.PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error)

func (f forwardFunc) Forward(ctx context.Context, peer node.PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	return f(ctx, peer, req, est, emit)
}

func newTestPeer(t *testing.T, id node.PeerID, fwd node.Forwarder) *testPeer {
	t.Helper()
	eng := newSimEngine(t)
	mesh, err := node.NewMesh(node.MeshConfig{Self: id, Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: node.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := node.NewRouter(node.RouterConfig{Engine: eng, Mesh: mesh, Forwarder: fwd, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), Recent: 8})
	if err != nil {
		t.Fatal(err)
	}
	return &testPeer{id: id, eng: eng, router: r, reg: reg}
}

func newSimEngine(t *testing.T) *sim.Engine {
	t.Helper()
	p, _ := sim.Preset("tiny")
	eng, err := sim.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// advertise tells a's mesh that peer holds prompt and is idle and fast.
func advertise(t *testing.T, a *testPeer, peer node.PeerID, model string, prompt []int32) {
	t.Helper()
	src, err := cache.NewSource(cache.SourceConfig{Peer: string(peer), Model: model, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	tree := cache.NewTree(4, 1<<14)
	tree.Set(0, prompt, 1)
	d, _ := src.Update(tree)
	now := time.Now()
	if _, err := a.router.Mesh().ApplyDigest(peer, d, now); err != nil {
		t.Fatal(err)
	}
	a.router.Mesh().ApplyLoad(peer, node.Load{Slots: 4, PrefillTokPerSec: 1000, DecodeTokPerSec: 500, Seq: 1}, now)
}

// prompt returns n tokens of the tiny model's vocabulary, distinct per seed.
func prompt(seed, n int) []int32 {
	out := make([]int32, n)
	x := uint64(seed)*2654435761 + 1
	for i := range out {
		x = x*6364136223846793005 + 1442695040888963407
		out[i] = int32(3 + (x>>33)%500)
	}
	return out
}
