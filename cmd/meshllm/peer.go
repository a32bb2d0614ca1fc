package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/cmd/meshllm/wire"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/llama"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/node/dashboard"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/meshllm/meshllm/p2p"
	"github.com/prometheus/client_golang/prometheus"
)

// compile-time check: the mesh router is what the HTTP API serves with.
var _ httpapi.Generator = (*node.Router)(nil)

// meshPeer is a running mesh peer: engine (owned by the caller), libp2p host,
// gossip, router, announcer and HTTP API. Many can run in one process.
type meshPeer struct {
	host     *p2p.Host
	router   *node.Router
	httpAddr string
	stop     context.CancelFunc
	done     chan error
}

// wait blocks until the peer stopped and returns why.
func (p *meshPeer) wait() error { return <-p.done }

// close stops the peer and waits for it.
func (p *meshPeer) close() error {
	p.stop()
	return p.wait()
}

// peerConfig is what startPeer needs besides the engine.
type peerConfig struct {
	p2p    p2p.Config
	http   httpapi.Config
	policy node.Policy
	access access
	events io.Writer // peers joining and leaving are reported here; nil: nowhere
	// embed serves the embedding endpoints (--embed-model); nil: the
	// served model's engine does.
	embed httpapi.Embeddings
}

// startPeer starts a mesh peer around eng and returns once its HTTP API
// listens. The peer runs until ctx ends or close is called; eng stays the
// caller's to close.
func startPeer(ctx context.Context, eng *llama.Engine, pc peerConfig) (*meshPeer, error) {
	pcfg, hcfg, policy, acc := pc.p2p, pc.http, pc.policy, pc.access
	info := eng.Info()
	reg := prometheus.NewRegistry()
	pcfg.Metrics = reg
	if pcfg.DataDir != "" {
		if err := os.MkdirAll(pcfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var closers []func() error
	fail := func(err error) (*meshPeer, error) {
		cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		return nil, err
	}
	gater := p2p.NewGater(acc.allow) // admits everyone when there is no allowlist
	pcfg.ConnectionGater = gater
	host, err := p2p.New(ctx, pcfg)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, host.Close)
	self := host.ID()
	if acc.allow != nil {
		gater.Allow(self)
		for _, bp := range pcfg.BootstrapPeers {
			if ai, err := peer.AddrInfoFromString(bp); err == nil {
				gater.Allow(ai.ID) // the peers you bootstrap from are trusted by you
			}
		}
	}
	var membership *p2p.Membership
	if acc.key != nil || acc.allow != nil {
		membership, err = p2p.NewMembership(host.LibP2P(), p2p.MembershipConfig{Key: acc.key, Gater: gater, Logger: slog.Default()})
		if err != nil {
			return fail(err)
		}
		closers = append(closers, membership.Close)
	}

	// The router's trust in each peer (do its cache claims hold?) becomes
	// that peer's GossipSub application score; the router is built below.
	trust := &wire.GossipTrust{}
	scores := []func(peer.ID) float64{trust.Score}
	gopts := p2p.GossipOptions{Introduce: host.Introduce} // relayed authors we lack are dialed, to be heard first-hand
	if membership != nil {
		scores = append(scores, membership.AppScore)
		gopts.PubSubOptions = membership.PubSubOptions()
	}
	gopts.AppScore = p2p.AppScores(scores...)
	gossip, err := p2p.NewGossip(ctx, host.LibP2P(), gopts)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, gossip.Close)
	if err := registerGossipMetrics(reg, gossip); err != nil {
		return fail(err)
	}
	topic, err := gossip.Join(info.ID)
	if err != nil {
		return fail(err)
	}
	mesh, err := node.NewMesh(node.MeshConfig{
		Self: node.PeerID(self.String()), Model: info.ID, ModelName: info.Name,
		RTT: wire.RTTSource{RTTs: host, Limited: wire.LimitedTracker(host.LibP2P())}, Policy: policy,
		HashKey: acc.hashKey(), // the same key as the Source below: members' digests match
	})
	if err != nil {
		return fail(err)
	}
	speeds := node.NewSpeeds(0, 0, 0)
	if pf, dc, err := measureSpeeds(ctx, eng); err == nil {
		// Seeded, so the first decisions (and the first announcements)
		// use this machine's real speed, not the router's cautious guess.
		speeds = node.NewSpeeds(0, pf, dc)
	}
	client := p2p.NewInferClient(host.LibP2P(), p2p.InferClientOptions{Observe: host.ObserveRTT})
	router, err := node.NewRouter(node.RouterConfig{
		Engine: eng, Mesh: mesh, Forwarder: wire.Forwarder{Client: client, Model: info.ID},
		Speeds: speeds, Registry: reg, Logger: slog.Default(),
		Forward: acc.forward, Members: isMember(membership),
	})
	if err != nil {
		return fail(err)
	}
	trust.Set(router.Trust())
	handler := p2p.LimitHandler(wire.ServeForwarded(router, info.ID), p2p.DefaultRateLimits())
	if membership != nil {
		handler = membership.Guard(handler) // outsiders do not spend the rate budget
	}
	infersvc := p2p.NewInferService(host.LibP2P(), handler, p2p.InferServiceOptions{})
	closers = append(closers, infersvc.Close)

	epoch := uint64(time.Now().UnixNano())
	source, err := cache.NewSource(cache.SourceConfig{Peer: self.String(), Model: info.ID, Epoch: epoch, HashKey: acc.hashKey()})
	if err != nil {
		return fail(err)
	}
	ann, err := node.NewAnnounce(node.AnnounceConfig{
		Cache: eng, Stats: eng, Source: source, Speeds: speeds, Policy: policy,
		Publish: wire.Announcer{Topic: topic, Self: self, Epoch: epoch}, Logger: slog.Default(),
	})
	if err != nil {
		return fail(err)
	}
	snaps := wire.SnapshotProvider(ann, info.ID)
	if membership != nil {
		snaps = membership.GuardSnapshots(snaps) // outsiders learn nothing of the cache
	}
	snapsvc := p2p.NewSnapshotService(host.LibP2P(), snaps)
	closers = append(closers, snapsvc.Close)

	dash, err := dashboard.New(dashboard.Config{Router: router, Registry: reg,
		HotPrefixes: dashboard.HotPrefixes(eng, 8, prefixLabel(eng))})
	if err != nil {
		return fail(err)
	}
	srv, err := httpapi.NewServer(hcfg, router, httpapi.WithRegistry(reg), httpapi.WithDashboard(dash.Handler()),
		httpapi.WithEmbeddings(pc.embed),
		httpapi.WithRoute("GET /v1/mesh", router.MeshHandler()), httpapi.WithLogger(slog.Default()))
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", hcfg.ListenAddr)
	if err != nil {
		return fail(err)
	}

	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	run(func() { ann.Run(ctx) })
	run(func() { dash.Run(ctx) })
	run(func() { wire.ReceiveGossip(ctx, topic, mesh) })
	run(func() { watchPeers(ctx, host, mesh, pc.events) })
	run(func() { wire.PullSnapshots(ctx, host.LibP2P(), mesh, info.ID, 0) })
	run(func() {
		if err := host.JoinNamespace(ctx, p2p.ModelNamespace(info.ID)); err != nil && ctx.Err() == nil {
			slog.Warn("discovery stopped", "err", err)
		}
	})
	p := &meshPeer{host: host, router: router, httpAddr: ln.Addr().String(), stop: cancel, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ctx, ln)
		cancel()
		wg.Wait()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		p.done <- err
	}()
	return p, nil
}

// isMember is the router's membership test (node.RouterConfig.Members):
// the peers m proves members of the private mesh; nil (no one, under
// --forward members) without a membership.
func isMember(m *p2p.Membership) func(node.PeerID) bool {
	if m == nil {
		return nil
	}
	return func(id node.PeerID) bool {
		p, err := peer.Decode(string(id))
		return err == nil && m.IsMember(p)
	}
}

// prefixLabel renders a cached prefix for the dashboard: its first words,
// without the BOS token and line breaks.
func prefixLabel(eng *llama.Engine) func([]int32) string {
	return func(toks []int32) string {
		text := strings.Join(strings.Fields(eng.Detokenize(toks[:min(len(toks), 24)])), " ")
		text = strings.TrimPrefix(strings.TrimPrefix(text, "<s>"), " ")
		if len(text) > 48 {
			text = text[:48] + "…"
		}
		return text
	}
}

// measureSpeeds times one short prefill and decode on eng: this peer's
// prefill and decode tokens per second, before any request has been served.
func measureSpeeds(ctx context.Context, eng *llama.Engine) (prefill, decode float64, err error) {
	info := eng.Info()
	prompt := make([]int32, min(128, info.ContextLength/4))
	for i := range prompt {
		prompt[i] = int32(3 + (i*7919)%max(1, info.VocabSize-3)) // no special tokens, nothing cached
	}
	res, err := eng.Generate(ctx, infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: 32}}, func(infer.Piece) error { return nil })
	if err != nil {
		return 0, 0, err
	}
	return res.PrefillTokensPerSecond(), res.DecodeTokensPerSecond(), nil
}

// watchPeers tells the mesh when a peer's last connection closes, and the
// user (on out) when peers come and go.
func watchPeers(ctx context.Context, host *p2p.Host, mesh *node.Mesh, out io.Writer) {
	events, err := host.SubscribePeers(ctx)
	if err != nil {
		return
	}
	for ev := range events {
		if !ev.Connected {
			mesh.PeerDown(node.PeerID(ev.Peer.String()))
		}
		if out != nil {
			what := "connected"
			switch {
			case !ev.Connected:
				what = "left"
			case ev.Limited:
				what = "connected (relayed)"
			}
			fmt.Fprintf(out, "peer %s %s; %d connected\n", ev.Peer, what, len(host.Peers()))
		}
	}
}
