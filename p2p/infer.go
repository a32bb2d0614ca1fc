package p2p

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// InferProtocol is the stream protocol of forwarded requests.
const InferProtocol protocol.ID = "/meshllm/infer/1.0.0"

// InferHandler serves one forwarded request locally. It must not forward
// it again: a request that arrives over InferProtocol has used its one hop.
// It calls send for each piece of generated text, from its own goroutine and
// never after returning; send fails once the stream is gone, and the handler
// should then stop. A piece whose logprobs would not fit one frame (or
// exceed MaxPieceLogprobs) reaches the client as several consecutive
// pieces, the text in the first, adding up to the same Tokens and Logprobs. ctx is cancelled when the client resets the stream (it
// cancelled), the request's deadline passes, or the service closes. To fail
// with a given code the handler returns an *InferError; other errors are
// sent as ErrInternal (or ErrDeadline when ctx's deadline passed).
type InferHandler func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error)

// InferServiceOptions tunes an InferService; the zero value of each field
// selects the default in its comment.
type InferServiceOptions struct {
	// MaxFrame bounds a frame read or written (default DefaultMaxFrame).
	MaxFrame int
	// MaxStreams bounds requests served at once over the protocol (default
	// 64); more get ErrBusy. The node's own queue threshold refuses earlier.
	MaxStreams int
	// MaxStreamsPerPeer bounds requests served at once for one remote peer
	// (default 8), so one origin cannot take every stream.
	MaxStreamsPerPeer int
	// RequestTimeout bounds the wait for the request frame (default 10 s).
	RequestTimeout time.Duration
	// WriteTimeout bounds each frame write (default 10 s): a client that
	// stops reading loses its stream.
	WriteTimeout time.Duration
	// MaxDuration bounds every request served (default 10 min): one that
	// carries no deadline, or a later one, gets this much from its arrival.
	MaxDuration time.Duration
	// MaxPromptTokens bounds the prompt a request frame may decode to
	// (default MaxFrame/4, so the decoded tokens, 4 bytes each, take no
	// more memory than the frame they came in; at most MaxPromptTokens,
	// the codec's limit). A longer prompt is a bad request, refused before
	// anything is allocated for it. Set it to the served context to refuse
	// what the engine would refuse anyway.
	MaxPromptTokens int
	// BusyRetryAfter is the retry hint sent with ErrBusy (default 1 s).
	BusyRetryAfter time.Duration
}

func (o *InferServiceOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFrame, DefaultMaxFrame)
	def(&o.MaxStreams, 64)
	def(&o.MaxStreamsPerPeer, 8)
	defd(&o.RequestTimeout, 10*time.Second)
	defd(&o.WriteTimeout, 10*time.Second)
	defd(&o.MaxDuration, 10*time.Minute)
	defd(&o.BusyRetryAfter, time.Second)
	def(&o.MaxPromptTokens, o.MaxFrame/4)
	o.MaxPromptTokens = max(1, min(o.MaxPromptTokens, MaxPromptTokens))
}

// InferStats counts what an InferService did; see InferService.Stats.
type InferStats struct {
	Served   int64 // requests that ended with a final frame
	Failed   int64 // requests that ended with an error frame (Busy included)
	Refused  int64 // of those, refused with ErrBusy by the stream limits
	Reset    int64 // streams reset: garbage, timeouts, client cancels
	Active   int   // requests being served now
	BytesIn  int64 // frame bytes read
	BytesOut int64 // frame bytes written
}

// InferService answers InferProtocol streams with an InferHandler. Its
// methods are safe for concurrent use; each stream runs on the goroutine
// libp2p gives it, plus one that watches for the client's reset.
type InferService struct {
	h       host.Host
	handler InferHandler
	opts    InferServiceOptions
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	active int
	byPeer map[peer.ID]int

	served, failed, refused, reset, in, out atomic.Int64
}

// NewInferService registers handler for InferProtocol on h. Close removes it.
func NewInferService(h host.Host, handler InferHandler, opts InferServiceOptions) *InferService {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &InferService{h: h, handler: handler, opts: opts, ctx: ctx, cancel: cancel, byPeer: map[peer.ID]int{}}
	h.SetStreamHandler(InferProtocol, s.handle)
	return s
}

// Close stops accepting streams, cancels the handlers that run and waits for
// them to return.
func (s *InferService) Close() error {
	s.h.RemoveStreamHandler(InferProtocol)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Stats returns the service's counters.
func (s *InferService) Stats() InferStats {
	s.mu.Lock()
	active := s.active
	s.mu.Unlock()
	return InferStats{
		Served: s.served.Load(), Failed: s.failed.Load(), Refused: s.refused.Load(),
		Reset: s.reset.Load(), Active: active, BytesIn: s.in.Load(), BytesOut: s.out.Load(),
	}
}

// enter registers a stream; false when the service is closed.
func (s *InferService) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// acquire takes a serving slot for p; false when a limit is reached.
func (s *InferService) acquire(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active >= s.opts.MaxStreams || s.byPeer[p] >= s.opts.MaxStreamsPerPeer {
		return false
	}
	s.active++
	s.byPeer[p]++
	return true
}

func (s *InferService) release(p peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.byPeer[p]--; s.byPeer[p] <= 0 {
		delete(s.byPeer, p)
	}
}

func (s *InferService) handle(st network.Stream) {
	if !s.enter() {
		_ = st.Reset()
		return
	}
	defer s.wg.Done()
	fc := newFrameConn(st, s.opts.MaxFrame, s.opts.RequestTimeout, s.opts.WriteTimeout)
	defer func() {
		s.in.Add(fc.in)
		s.out.Add(fc.out)
	}()
	from := st.Conn().RemotePeer()

	req, received, err := s.readRequest(fc)
	if errors.Is(err, errNotARequest) {
		s.reset.Add(1)
		_ = st.Reset()
		return
	}
	if err == nil && req.Hops > 1 {
		err = badRequest("hop limit: request forwarded %d times, the limit is 1", req.Hops)
	}
	if err != nil {
		s.finishError(st, fc, &InferError{Code: ErrBadRequest, Message: err.Error()})
		return
	}
	req.Hops = 1
	if !s.acquire(from) {
		s.refused.Add(1)
		s.finishError(st, fc, &InferError{Code: ErrBusy, Message: "stream limit reached", RetryAfter: s.opts.BusyRetryAfter})
		return
	}
	defer s.release(from)

	// The origin's deadline, but never later than MaxDuration from now: a
	// remote peer cannot hold a slot longer by asking for more.
	if limit := received.Add(s.opts.MaxDuration); req.Deadline.IsZero() || req.Deadline.After(limit) {
		req.Deadline = limit
	}
	ctx, cancel := context.WithDeadline(s.ctx, req.Deadline)
	defer cancel()

	// The client keeps its write side open until it has the last frame, so
	// a read that fails with anything but EOF means it reset the stream;
	// bytes where none are due are a protocol violation.
	var clientGone atomic.Bool
	watched := make(chan struct{})
	var finished atomic.Bool
	go func() {
		defer close(watched)
		_ = st.SetReadDeadline(time.Time{})
		var b [1]byte
		n, err := fc.r.Read(b[:])
		if finished.Load() || (n == 0 && errors.Is(err, io.EOF)) {
			return
		}
		clientGone.Store(true)
		cancel()
	}()
	defer func() {
		finished.Store(true)
		_ = st.CloseRead()
		<-watched
		// CloseRead and CloseWrite do not free the stream: only Close or
		// Reset release it (and its resource-manager scope).
		_ = st.Close()
	}()

	var mu sync.Mutex // send may race with the end of the request
	done := false
	send := func(p InferPiece) error {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return errors.New("p2p: send after the handler returned")
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// A piece with many logprobs goes as several frames (see split).
		for _, part := range p.split(fc.max - 1) {
			if err := fc.writeFrame(FrameInferPiece, part.AppendBinary(nil)); err != nil {
				return err
			}
		}
		return nil
	}
	final, herr := s.handler(ctx, from, req, send)
	mu.Lock()
	done = true
	mu.Unlock()

	if clientGone.Load() || (herr != nil && errors.Is(ctx.Err(), context.Canceled)) {
		s.reset.Add(1)
		_ = st.Reset()
		return
	}
	if herr == nil && final == nil {
		herr = errors.New("handler returned no result")
	}
	if herr != nil {
		var ie *InferError
		switch {
		case errors.As(herr, &ie):
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			ie = &InferError{Code: ErrDeadline, Message: herr.Error()}
		default:
			ie = &InferError{Code: ErrInternal, Message: herr.Error()}
		}
		s.finishError(st, fc, ie)
		return
	}
	out := *final
	out.Elapsed = time.Since(received)
	if err := fc.writeFrame(FrameInferFinal, out.AppendBinary(nil)); err != nil {
		s.reset.Add(1)
		_ = st.Reset()
		return
	}
	s.served.Add(1)
	_ = st.CloseWrite()
}

// finishError writes an error frame and closes the stream.
func (s *InferService) finishError(st network.Stream, fc *frameConn, ie *InferError) {
	if err := fc.writeFrame(FrameError, ie.AppendBinary(nil)); err != nil {
		s.reset.Add(1)
		_ = st.Reset()
		return
	}
	s.failed.Add(1)
	_ = st.Close()
}

// errNotARequest: the stream did not start with a request frame (it failed,
// timed out or sent another frame type); it is reset without an answer.
var errNotARequest = errors.New("p2p: no request frame")

// readRequest reads and decodes a stream's request frame, with a prompt of
// at most MaxPromptTokens; received is when it was read. An error other
// than errNotARequest is the payload's, to be answered as a bad request.
// At its peak it holds the frame (at most MaxFrame bytes) and the decoded
// request (4 bytes a token, and the strings copied out of the frame):
// TestInferRequestWorstCaseMemory measures it.
func (s *InferService) readRequest(fc *frameConn) (req *InferRequest, received time.Time, err error) {
	f, err := fc.readFrame(0)
	if err != nil || f.Type != FrameInferRequest {
		return nil, time.Time{}, errNotARequest
	}
	received = time.Now()
	req, err = decodeInferRequest(f.Payload, received, s.opts.MaxPromptTokens)
	return req, received, err
}
