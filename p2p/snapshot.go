package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/meshllm/meshllm/cache"
)

// SnapshotProtocol is the stream protocol that pulls a peer's full cache
// digest for one model (anti-entropy after a gap or a new epoch).
const SnapshotProtocol protocol.ID = "/meshllm/digest/1.0.0"

// MaxSnapshotFrame bounds a snapshot frame: 4 MiB holds 512k block hashes,
// 32 times the default digest cap (cache: 16,384 blocks, 128 KiB).
const MaxSnapshotFrame = 4 << 20

// snapshotTimeout bounds each read and write of the snapshot protocol on
// the serving side; the fetching side uses its ctx, bounded the same way.
const snapshotTimeout = 10 * time.Second

// SnapshotProvider returns the encoded snapshot (cache.Digest.MarshalBinary
// of a KindSnapshot digest) of the local cache for a model, or false when
// the peer does not serve that model to the requesting peer from (the
// stream's authenticated remote peer; Membership.GuardSnapshots refuses
// outsiders). It is called on stream goroutines, concurrently: it must be
// safe for that (return a copy made by the owner of the cache, typically
// refreshed with every published delta).
type SnapshotProvider func(from peer.ID, modelID string) ([]byte, bool)

// SnapshotService answers SnapshotProtocol streams. Close removes it.
type SnapshotService struct {
	h        host.Host
	provider SnapshotProvider
}

// NewSnapshotService registers provider for SnapshotProtocol on h.
func NewSnapshotService(h host.Host, provider SnapshotProvider) *SnapshotService {
	s := &SnapshotService{h: h, provider: provider}
	h.SetStreamHandler(SnapshotProtocol, s.handle)
	return s
}

// Close removes the stream handler; streams being served finish.
func (s *SnapshotService) Close() error {
	s.h.RemoveStreamHandler(SnapshotProtocol)
	return nil
}

func (s *SnapshotService) handle(st network.Stream) {
	fc := newFrameConn(st, MaxSnapshotFrame, snapshotTimeout, snapshotTimeout)
	f, err := fc.readFrame(0)
	if err != nil || f.Type != FrameSnapshotRequest || len(f.Payload) > 1+MaxModelIDLen+2 {
		_ = st.Reset()
		return
	}
	d := decoder{b: f.Payload}
	d.version("snapshot request")
	model := d.str(MaxModelIDLen)
	if d.err != nil {
		_ = st.Reset()
		return
	}
	data, ok := s.provider(st.Conn().RemotePeer(), model)
	if !ok {
		ie := &InferError{Code: ErrUnknownModel, Message: model}
		_ = fc.writeFrame(FrameError, ie.AppendBinary(nil))
		_ = st.Close()
		return
	}
	if err := fc.writeFrame(FrameSnapshot, data); err != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// FetchSnapshot pulls p's snapshot digest for modelID. It checks that the
// digest is a snapshot of that model authored by p (its Peer field equals
// p.String()), so a peer cannot answer for another. ctx bounds the whole
// exchange; without a deadline it is bounded by 30 s. An *InferError with
// ErrUnknownModel says p does not serve the model.
func FetchSnapshot(ctx context.Context, h host.Host, p peer.ID, modelID string) (*cache.Digest, error) {
	if len(modelID) > MaxModelIDLen {
		return nil, badRequest("model ID of %d bytes", len(modelID))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	st, err := h.NewStream(ctx, p, SnapshotProtocol)
	if err != nil {
		return nil, fmt.Errorf("p2p: open snapshot stream to %s: %w", p, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	dl, _ := ctx.Deadline()
	wait := max(time.Until(dl), time.Millisecond)
	fc := newFrameConn(st, MaxSnapshotFrame, wait, wait)
	req := appendString([]byte{wireVersion}, modelID)
	if err := fc.writeFrame(FrameSnapshotRequest, req); err != nil {
		_ = st.Reset()
		return nil, ctxOr(ctx, fmt.Errorf("p2p: snapshot request to %s: %w", p, err))
	}
	_ = st.CloseWrite()
	f, err := fc.readFrame(0)
	if err != nil {
		_ = st.Reset()
		return nil, ctxOr(ctx, fmt.Errorf("p2p: snapshot from %s: %w", p, err))
	}
	_ = st.Close()
	switch f.Type {
	case FrameError:
		ie, err := DecodeInferError(f.Payload)
		if err != nil {
			return nil, err
		}
		return nil, ie
	case FrameSnapshot:
	default:
		return nil, fmt.Errorf("%w: unexpected %v frame", ErrFrameMalformed, f.Type)
	}
	dg, err := cache.Decode(f.Payload)
	if err != nil {
		return nil, fmt.Errorf("p2p: snapshot from %s: %w", p, err)
	}
	switch {
	case dg.Kind != cache.KindSnapshot:
		return nil, fmt.Errorf("%w: snapshot from %s is a %v", ErrForged, p, dg.Kind)
	case dg.Peer != p.String():
		return nil, fmt.Errorf("%w: snapshot from %s names peer %q", ErrForged, p, dg.Peer)
	case dg.Model != modelID:
		return nil, fmt.Errorf("%w: snapshot from %s is for model %q", ErrForged, p, dg.Model)
	}
	return dg, nil
}

// ErrForged: a digest or load names another author, model or kind than the
// one it came from or was asked for.
var ErrForged = errors.New("p2p: message does not match its sender")

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
