package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/p2p"
)

// This file adapts p2p (libp2p, wire types) to node's interfaces (router,
// mesh, announcer). node never imports p2p and p2p never imports node or
// infer; only the binary knows both.

// forwarder implements node.Forwarder over the /meshllm/infer stream.
type forwarder struct {
	client *p2p.InferClient
	model  string
}

func (f forwarder) Forward(ctx context.Context, to node.PeerID, req infer.Request, estimatedCached int, emit func(infer.Piece) error) (*infer.Result, error) {
	pid, err := peer.Decode(string(to))
	if err != nil {
		return nil, fmt.Errorf("%w: bad peer id %q", infer.ErrEngine, to)
	}
	s := req.Sampling
	wr := &p2p.InferRequest{
		ModelID: f.model,
		Prompt:  req.Prompt,
		Sampling: p2p.Sampling{
			Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, MinP: s.MinP,
			RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN, Seed: s.Seed,
			MaxTokens: s.MaxTokens, Stop: s.Stop,
		},
		EstimatedCached: estimatedCached, // Hops stays 0: the client marks it forwarded
	}
	if dl, ok := ctx.Deadline(); ok {
		wr.Deadline = dl
	}
	fin, err := f.client.Infer(ctx, pid, wr, func(p p2p.InferPiece) error {
		return emit(infer.Piece{Text: p.Text, Tokens: p.Tokens})
	})
	if err != nil {
		return nil, toInferError(err)
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

// toInferError maps a remote peer's typed error onto infer's errors, so the
// router's fallback logic (busy -> cooldown) and the HTTP status mapping see
// the same kinds as for local errors.
func toInferError(err error) error {
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

// fromInferError maps a local serving error onto the wire's codes.
func fromInferError(err error) error {
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

// serveForwarded is the InferHandler: a request from another peer is served
// here and only here (hop limit 1).
func serveForwarded(r *node.Router, modelID string) p2p.InferHandler {
	return func(ctx context.Context, from peer.ID, req *p2p.InferRequest, send func(p2p.InferPiece) error) (*p2p.InferFinal, error) {
		if req.ModelID != modelID {
			return nil, &p2p.InferError{Code: p2p.ErrUnknownModel, Message: "this peer serves model " + modelID}
		}
		s := req.Sampling
		ir := infer.Request{Prompt: req.Prompt, Sampling: infer.Sampling{
			Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, MinP: s.MinP,
			RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN, Seed: s.Seed,
			MaxTokens: s.MaxTokens, Stop: s.Stop,
		}}
		res, err := r.ServeForwarded(ctx, ir, func(p infer.Piece) error {
			return send(p2p.InferPiece{Text: p.Text, Tokens: p.Tokens})
		})
		if err != nil {
			return nil, fromInferError(err)
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

// announcer implements node.Announcer on a gossip topic.
type announcer struct {
	topic *p2p.Topic
	self  peer.ID
	epoch uint64
}

func (a announcer) PublishDigest(d *cache.Digest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.topic.PublishDigest(ctx, d)
}

func (a announcer) PublishLoad(l node.Load) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.topic.PublishLoad(ctx, &p2p.Load{
		Peer: a.self, Epoch: a.epoch, Seq: l.Seq, At: time.Now(),
		QueueDepth: l.QueueDepth, Active: l.Active, Slots: l.Slots, PushBack: l.PushBack,
		PrefillTokPerSec: l.PrefillTokPerSec, DecodeTokPerSec: l.DecodeTokPerSec,
	})
}

// rttSource implements node.RTTSource and node.RelaySource over the host.
type rttSource struct {
	h       *p2p.Host
	limited func(peer.ID) bool
}

func (s rttSource) RTT(id node.PeerID) (time.Duration, bool) {
	pid, err := peer.Decode(string(id))
	if err != nil {
		return 0, false
	}
	return s.h.RTT(pid)
}

func (s rttSource) Relayed(id node.PeerID) bool {
	pid, err := peer.Decode(string(id))
	if err != nil || s.limited == nil {
		return false
	}
	return s.limited(pid)
}
