package p2p

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Timing is what the client measured of one forwarded request.
type Timing struct {
	FirstFrame time.Duration // from opening the stream to the first frame
	Total      time.Duration // from opening the stream to the final frame
	// Network is Total minus the server's Elapsed: one round trip plus the
	// transfer of the request and the last frame. It is the RTT sample.
	Network time.Duration
}

// InferClientOptions tunes an InferClient; the zero value of each field
// selects the default in its comment.
type InferClientOptions struct {
	// MaxFrame bounds a frame read or written (default DefaultMaxFrame).
	MaxFrame int
	// IdleTimeout bounds the wait for each frame, the first one included
	// (default 2 min: queue wait plus prefill of a long prompt on a slow
	// peer). A ctx deadline that comes sooner wins.
	IdleTimeout time.Duration
	// WriteTimeout bounds the request write (default 10 s).
	WriteTimeout time.Duration
	// DialTimeout bounds the dial when there is no connection to the peer
	// yet (default 2 s), apart from the reply's wait. A peer restarted on
	// new ports leaves its old addresses in the peerstore: TCP to them is
	// refused at once, but QUIC to a closed UDP port hears nothing and
	// would hold the request for the host's whole dial timeout.
	DialTimeout time.Duration
	// Observe, if set, receives each served request's RTT sample
	// (Timing.Network), for the caller's RTT estimator. It is called on the
	// caller's goroutine before Infer returns.
	Observe func(peer.ID, time.Duration)
	// OnTiming, if set, receives each served request's full Timing.
	OnTiming func(peer.ID, Timing)
}

// InferClient sends requests over InferProtocol. It is safe for concurrent
// use: each Infer call has its own stream.
type InferClient struct {
	h    host.Host
	opts InferClientOptions
}

// NewInferClient returns a client that opens streams from h.
func NewInferClient(h host.Host, opts InferClientOptions) *InferClient {
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = DefaultMaxFrame
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 2 * time.Minute
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 2 * time.Second
	}
	return &InferClient{h: h, opts: opts}
}

// Infer forwards req to p and streams its pieces to onPiece (which may be
// nil) on the caller's goroutine. It returns the final frame, or:
//   - an *InferError (errors.Is with ErrBusy, ErrUnknownModel, ...) when p
//     refused or failed the request; pieces may have been delivered before;
//   - ctx's error when ctx ended: the stream is reset and p's handler sees
//     its context cancelled;
//   - onPiece's error, after resetting the stream;
//   - another error when the stream failed (reset, timeout, garbage).
//
// req.Hops must be 0: a request that arrived over the protocol is never
// forwarded again (ErrBadRequest, without contacting p).
func (c *InferClient) Infer(ctx context.Context, p peer.ID, req *InferRequest, onPiece func(InferPiece) error) (*InferFinal, error) {
	if req.Hops != 0 {
		return nil, badRequest("hop limit: a forwarded request is served where it arrives")
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	st, err := c.h.NewStream(network.WithDialPeerTimeout(ctx, c.opts.DialTimeout), p, InferProtocol)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("p2p: open infer stream to %s: %w", p, err)
	}
	start := time.Now() // after the dial: a new connection is no RTT sample
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	fail := func(err error) (*InferFinal, error) {
		_ = st.Reset()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}

	fc := newFrameConn(st, c.opts.MaxFrame, c.opts.IdleTimeout, c.opts.WriteTimeout)
	wire := *req
	wire.Hops = 1
	if err := fc.writeFrame(FrameInferRequest, wire.AppendBinary(nil, time.Now())); err != nil {
		return fail(fmt.Errorf("p2p: send request to %s: %w", p, err))
	}
	var first time.Duration
	for {
		wait := c.opts.IdleTimeout
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, max(time.Until(dl), time.Millisecond))
		}
		f, err := fc.readFrame(wait)
		if err != nil {
			return fail(fmt.Errorf("p2p: infer stream from %s: %w", p, err))
		}
		if first == 0 {
			first = max(time.Since(start), 1)
		}
		switch f.Type {
		case FrameInferPiece:
			pc, err := DecodeInferPiece(f.Payload)
			if err != nil {
				return fail(err)
			}
			if onPiece != nil {
				if err := onPiece(pc); err != nil {
					return fail(err)
				}
			}
		case FrameInferFinal:
			fin, err := DecodeInferFinal(f.Payload)
			if err != nil {
				return fail(err)
			}
			_ = st.Close()
			t := Timing{FirstFrame: first, Total: time.Since(start)}
			t.Network = max(t.Total-fin.Elapsed, 0)
			if c.opts.Observe != nil {
				c.opts.Observe(p, t.Network)
			}
			if c.opts.OnTiming != nil {
				c.opts.OnTiming(p, t)
			}
			return fin, nil
		case FrameError:
			ie, err := DecodeInferError(f.Payload)
			if err != nil {
				return fail(err)
			}
			_ = st.Close()
			return nil, ie
		default:
			return fail(fmt.Errorf("%w: unexpected %v frame", ErrFrameMalformed, f.Type))
		}
	}
}
