// Package wire adapts p2p (libp2p, wire types) to node's interfaces: the
// router's Forwarder, the InferHandler that serves forwarded requests, the
// announcer that publishes digests and loads, the RTT source, and the loops
// that feed gossip and snapshots into the mesh view. node never imports p2p
// and p2p never imports node or infer; this package knows both. It does not
// import infer/llama, so it builds without cgo: experiments can wire peers
// around the simulated engine with it.
//
// Concurrency: the adapters are safe for concurrent use; ReceiveGossip and
// PullSnapshots are loops, each meant to run on its own goroutine until ctx
// ends.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/p2p"
)

// Forwarder implements node.Forwarder over the /meshllm/infer stream.
type Forwarder struct {
	// Client opens the /meshllm/infer streams.
	Client *p2p.InferClient
	// Model is the model ID sent with every forwarded request.
	Model string
}

// Forward sends req to peer to and streams its pieces to emit.
func (f Forwarder) Forward(ctx context.Context, to node.PeerID, req infer.Request, estimatedCached int, emit func(infer.Piece) error) (*infer.Result, error) {
	pid, err := peer.Decode(string(to))
	if err != nil {
		return nil, fmt.Errorf("%w: bad peer id %q", infer.ErrEngine, to)
	}
	wr := &p2p.InferRequest{
		ModelID:         f.Model,
		Prompt:          req.Prompt,
		Sampling:        SamplingToWire(req.Sampling),
		EstimatedCached: estimatedCached, // Hops stays 0: the client marks it forwarded
	}
	if dl, ok := ctx.Deadline(); ok {
		wr.Deadline = dl
	}
	fin, err := f.Client.Infer(ctx, pid, wr, func(p p2p.InferPiece) error {
		return emit(PieceFromWire(p))
	})
	if err != nil {
		return nil, ToInferError(err)
	}
	return &infer.Result{
		PromptTokens:    fin.PromptTokens,
		CachedTokens:    fin.CachedTokens,
		GeneratedTokens: fin.GeneratedTokens,
		QueueWait:       fin.QueueWait,
		PrefillDuration: fin.Prefill,
		DecodeDuration:  fin.Decode,
		TimeToFirst:     fin.TimeToFirst,
		FinishReason:    fin.FinishReason,
		Slot:            -1,
	}, nil
}

// ToInferError maps a remote peer's typed error onto infer's errors, so the
// router's fallback logic (busy -> cooldown) and the HTTP status mapping see
// the same kinds as for local errors.
func ToInferError(err error) error {
	var ie *p2p.InferError
	if !errors.As(err, &ie) {
		return err // transport errors: reset, timeout, connection lost
	}
	kinds := map[p2p.ErrorCode]error{
		p2p.ErrBusy:            infer.ErrBusy,
		p2p.ErrUnknownModel:    infer.ErrUnknownModel,
		p2p.ErrBadRequest:      infer.ErrBadRequest,
		p2p.ErrContextOverflow: infer.ErrContextOverflow,
		p2p.ErrInternal:        infer.ErrEngine,
		p2p.ErrDeadline:        context.DeadlineExceeded,
	}
	if k, ok := kinds[ie.Code]; ok {
		return fmt.Errorf("%w: remote: %s", k, ie.Message)
	}
	return err
}

// FromInferError maps a local serving error onto the wire's codes.
func FromInferError(err error) error {
	codes := []struct {
		kind error
		code p2p.ErrorCode
	}{
		{infer.ErrBusy, p2p.ErrBusy},
		{infer.ErrClosed, p2p.ErrBusy},
		{infer.ErrUnknownModel, p2p.ErrUnknownModel},
		{infer.ErrContextOverflow, p2p.ErrContextOverflow},
		{infer.ErrBadRequest, p2p.ErrBadRequest},
		{context.DeadlineExceeded, p2p.ErrDeadline},
	}
	for _, c := range codes {
		if errors.Is(err, c.kind) {
			return &p2p.InferError{Code: c.code, Message: err.Error()}
		}
	}
	return &p2p.InferError{Code: p2p.ErrInternal, Message: err.Error()}
}

// ServeForwarded returns the InferHandler: a request from another peer is served
// here and only here (hop limit 1).
func ServeForwarded(r *node.Router, modelID string) p2p.InferHandler {
	return func(ctx context.Context, from peer.ID, req *p2p.InferRequest, send func(p2p.InferPiece) error) (*p2p.InferFinal, error) {
		if req.ModelID != modelID {
			return nil, &p2p.InferError{Code: p2p.ErrUnknownModel, Message: "this peer serves model " + modelID}
		}
		ir := infer.Request{Prompt: req.Prompt, Sampling: SamplingFromWire(req.Sampling)}
		res, err := r.ServeForwarded(ctx, ir, func(p infer.Piece) error {
			return send(PieceToWire(p))
		})
		if err != nil {
			return nil, FromInferError(err)
		}
		return &p2p.InferFinal{
			PromptTokens:    res.PromptTokens,
			CachedTokens:    res.CachedTokens,
			GeneratedTokens: res.GeneratedTokens,
			QueueWait:       res.QueueWait,
			Prefill:         res.PrefillDuration,
			Decode:          res.DecodeDuration,
			TimeToFirst:     res.TimeToFirst,
			FinishReason:    res.FinishReason,
		}, nil
	}
}

// Announcer implements node.Announcer on a gossip topic.
type Announcer struct {
	// Topic is the model's gossip topic.
	Topic *p2p.Topic
	// Self is this peer's ID, stamped on loads.
	Self peer.ID
	// Epoch is this peer's cache epoch (a new one per start).
	Epoch uint64
}

// PublishDigest publishes d on the topic.
func (a Announcer) PublishDigest(d *cache.Digest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Topic.PublishDigest(ctx, d)
}

// PublishLoad publishes l on the topic.
func (a Announcer) PublishLoad(l node.Load) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Topic.PublishLoad(ctx, &p2p.Load{
		Peer: a.Self, Epoch: a.Epoch, Seq: l.Seq, At: time.Now(),
		QueueDepth: l.QueueDepth, Active: l.Active, Slots: l.Slots, PushBack: l.PushBack,
		PrefillTokPerSec: l.PrefillTokPerSec, DecodeTokPerSec: l.DecodeTokPerSec,
	})
}

// SnapshotProvider serves ann's full digest of model to snapshot pulls.
func SnapshotProvider(ann *node.Announce, model string) p2p.SnapshotProvider {
	return func(_ peer.ID, m string) ([]byte, bool) {
		if m != model {
			return nil, false
		}
		d := ann.Snapshot()
		if d == nil {
			return nil, false
		}
		b, err := d.MarshalBinary()
		return b, err == nil
	}
}

// GossipTrust adapts the router's trust in each peer (does its cache
// claims hold?) to p2p.GossipOptions.AppScore: that peer's GossipSub
// application score. The gossip layer is built before the router, so the
// Trust is Set later; until then every score is 0. GossipSub calls Score
// for every scored peer each time it scores (heartbeats, forwarding
// choices), so the peer IDs' text form is memoized: it was most of the
// cost. Safe for concurrent use.
type GossipTrust struct {
	trust atomic.Pointer[node.Trust]
	mu    sync.Mutex
	ids   map[peer.ID]node.PeerID
}

// maxTrustIDs bounds GossipTrust's memo; it starts over when full (a mesh
// of churning peers, or a Sybil flood, cannot grow it without bound).
const maxTrustIDs = 4096

// Set installs t.
func (g *GossipTrust) Set(t *node.Trust) { g.trust.Store(t) }

// Score is p's application score: the Trust's GossipScore, 0 before Set.
func (g *GossipTrust) Score(p peer.ID) float64 {
	t := g.trust.Load()
	if t == nil {
		return 0
	}
	return t.GossipScore(g.id(p))
}

func (g *GossipTrust) id(p peer.ID) node.PeerID {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.ids[p]; ok {
		return id
	}
	if g.ids == nil || len(g.ids) >= maxTrustIDs {
		g.ids = make(map[peer.ID]node.PeerID)
	}
	id := node.PeerID(p.String())
	g.ids[p] = id
	return id
}

// RTTs is anything with a per-peer round-trip estimate: *p2p.Host and
// *p2p.RTTEstimator both are.
type RTTs interface {
	RTT(peer.ID) (time.Duration, bool)
}

// RTTSource implements node.RTTSource and node.RelaySource.
type RTTSource struct {
	// RTTs gives the round trips.
	RTTs RTTs
	// Limited reports whether a peer is reachable only over relays; nil:
	// never.
	Limited func(peer.ID) bool
}

// RTT returns the estimate for id, false when there is none.
func (s RTTSource) RTT(id node.PeerID) (time.Duration, bool) {
	pid, err := peer.Decode(string(id))
	if err != nil {
		return 0, false
	}
	return s.RTTs.RTT(pid)
}

// Relayed reports whether id is reachable only over relays.
func (s RTTSource) Relayed(id node.PeerID) bool {
	pid, err := peer.Decode(string(id))
	if err != nil || s.Limited == nil {
		return false
	}
	return s.Limited(pid)
}

// LimitedTracker reports whether all connections to a peer are relayed.
func LimitedTracker(h host.Host) func(peer.ID) bool {
	return func(p peer.ID) bool {
		conns := h.Network().ConnsToPeer(p)
		if len(conns) == 0 {
			return false
		}
		for _, c := range conns {
			if !c.Stat().Limited {
				return false
			}
		}
		return true
	}
}

// ReceiveGossip applies other peers' digests and loads from topic to the
// mesh view until ctx ends or the topic closes. Each is applied as its
// author's (msg.From, the signer), never the relay's (msg.ReceivedFrom):
// the topic delivers only messages whose author is a connected topic
// member, and the mesh bounds what those can hold (node.Mesh's limits; a
// digest a full view refuses is dropped, and the next one tries again).
func ReceiveGossip(ctx context.Context, topic *p2p.Topic, mesh *node.Mesh) {
	for {
		msg, err := topic.Next(ctx)
		if err != nil {
			return
		}
		from := node.PeerID(msg.From.String())
		now := time.Now()
		switch {
		case msg.Digest != nil:
			if _, err := mesh.ApplyDigest(from, msg.Digest, now); err != nil {
				slog.Debug("digest not applied", "from", from, "via", msg.ReceivedFrom, "view_full", errors.Is(err, node.ErrViewFull), "err", err)
			}
		case msg.Load != nil:
			l := msg.Load
			mesh.ApplyLoad(from, node.Load{
				QueueDepth: l.QueueDepth, Active: l.Active, Slots: l.Slots, PushBack: l.PushBack,
				PrefillTokPerSec: l.PrefillTokPerSec, DecodeTokPerSec: l.DecodeTokPerSec, Seq: l.Seq,
			}, now)
		}
	}
}

// DefaultSnapshotInterval is how often PullSnapshots looks for replicas
// that need a full snapshot when it is given no interval.
const DefaultSnapshotInterval = 500 * time.Millisecond

// PullSnapshots is the anti-entropy loop: every interval (0: the default)
// it expires silent peers, and replicas that saw a gap or a new epoch get
// the peer's full snapshot of model over a stream. It returns when ctx
// ends.
func PullSnapshots(ctx context.Context, h host.Host, mesh *node.Mesh, model string, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultSnapshotInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mesh.Expire(time.Now())
		for _, id := range mesh.NeedSnapshots() {
			pid, err := peer.Decode(string(id))
			if err != nil {
				continue
			}
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			d, err := p2p.FetchSnapshot(fctx, h, pid, model)
			cancel()
			if err != nil {
				slog.Debug("snapshot pull failed", "peer", id, "err", err)
				continue
			}
			mesh.ApplyDigest(id, d, time.Now())
		}
	}
}
