package p2p

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// inferPair starts an InferService with handler on hosts[1] and returns a
// client on hosts[0].
func inferPair(t *testing.T, hs []host.Host, handler InferHandler, so InferServiceOptions, co InferClientOptions) (*InferClient, *InferService) {
	t.Helper()
	svc := NewInferService(hs[1], handler, so)
	t.Cleanup(func() { _ = svc.Close() })
	return NewInferClient(hs[0], co), svc
}

func TestInferStreamsPiecesAndFinal(t *testing.T) {
	hs := mockHosts(t, 2)
	var got struct {
		from peer.ID
		req  *InferRequest
	}
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		got.from, got.req = from, req
		for _, w := range []string{"Once", " upon", " a time"} {
			if err := send(InferPiece{Text: w, Tokens: 1}); err != nil {
				return nil, err
			}
		}
		return &InferFinal{PromptTokens: len(req.Prompt), CachedTokens: 4, GeneratedTokens: 3, FinishReason: "stop",
			TimeToFirst: time.Millisecond}, nil
	}
	var samples []time.Duration
	var timing Timing
	client, svc := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{
		Observe:  func(p peer.ID, d time.Duration) { samples = append(samples, d) },
		OnTiming: func(p peer.ID, tm Timing) { timing = tm },
	})
	req := sampleRequest()
	req.Hops = 0
	req.Deadline = time.Now().Add(time.Minute)
	var text string
	fin, err := client.Infer(context.Background(), hs[1].ID(), req, func(p InferPiece) error {
		text += p.Text
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text != "Once upon a time" {
		t.Fatalf("text %q", text)
	}
	if fin.CachedTokens != 4 || fin.GeneratedTokens != 3 || fin.PromptTokens != len(req.Prompt) || fin.FinishReason != "stop" {
		t.Fatalf("final %+v", fin)
	}
	if fin.Elapsed <= 0 {
		t.Fatalf("server did not report its elapsed time: %+v", fin)
	}
	if got.from != hs[0].ID() || got.req.Hops != 1 || got.req.ModelID != req.ModelID || len(got.req.Prompt) != len(req.Prompt) {
		t.Fatalf("handler saw from=%s req=%+v", got.from, got.req)
	}
	if d := got.req.Deadline.Sub(req.Deadline); d < 0 || d > 10*time.Second {
		t.Fatalf("deadline moved by %v", d)
	}
	if len(samples) != 1 || samples[0] != timing.Network || timing.Total < timing.FirstFrame || timing.FirstFrame <= 0 {
		t.Fatalf("samples %v timing %+v", samples, timing)
	}
	// The server finishes its bookkeeping after the client has the final.
	pollUntil(t, 10*time.Second, "the stream to end on the server", func() bool { return svc.Stats().Active == 0 })
	if st := svc.Stats(); st.Served != 1 || st.BytesIn == 0 || st.BytesOut == 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInferTypedErrors(t *testing.T) {
	hs := mockHosts(t, 2)
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		switch req.ModelID {
		case "unknown":
			return nil, &InferError{Code: ErrUnknownModel, Message: "no such model"}
		case "overflow":
			return nil, fmt.Errorf("wrapped: %w", &InferError{Code: ErrContextOverflow})
		case "nil":
			return nil, nil
		}
		return nil, errors.New("engine exploded")
	}
	client, _ := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	for model, want := range map[string]ErrorCode{"unknown": ErrUnknownModel, "overflow": ErrContextOverflow, "nil": ErrInternal, "x": ErrInternal} {
		_, err := client.Infer(context.Background(), hs[1].ID(), &InferRequest{ModelID: model, Prompt: []int32{1}}, nil)
		var ie *InferError
		if !errors.Is(err, want) || !errors.As(err, &ie) {
			t.Errorf("model %s: got %v, want %v", model, err, want)
		}
	}
}

func TestInferCancelResetsAndCancelsHandler(t *testing.T) {
	hs := mockHosts(t, 2)
	handlerDone := make(chan error, 1)
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		if err := send(InferPiece{Text: "first", Tokens: 1}); err != nil {
			return nil, err
		}
		<-ctx.Done() // a long decode, stopped only by cancellation
		handlerDone <- ctx.Err()
		return nil, ctx.Err()
	}
	client, svc := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := client.Infer(ctx, hs[1].ID(), &InferRequest{ModelID: "m", Prompt: []int32{1}}, func(InferPiece) error {
		cancel() // the origin's client went away after the first piece
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("client got %v, want context.Canceled", err)
	}
	select {
	case herr := <-handlerDone:
		if !errors.Is(herr, context.Canceled) {
			t.Fatalf("handler ctx ended with %v", herr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler's context was not cancelled after the client reset the stream")
	}
	pollUntil(t, 10*time.Second, "the stream to count as reset", func() bool {
		s := svc.Stats()
		return s.Reset == 1 && s.Active == 0
	})
}

func TestInferDeadlinePassesOnServer(t *testing.T) {
	hs := mockHosts(t, 2)
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	client, _ := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	req := &InferRequest{ModelID: "m", Prompt: []int32{1}, Deadline: time.Now().Add(20 * time.Millisecond)}
	_, err := client.Infer(context.Background(), hs[1].ID(), req, nil)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("got %v, want ErrDeadline", err)
	}
}

func TestInferHopLimit(t *testing.T) {
	hs := mockHosts(t, 2)
	called := false
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		called = true
		return &InferFinal{}, nil
	}
	client, _ := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	// A handler must never forward what it received: the client refuses.
	_, err := client.Infer(context.Background(), hs[1].ID(), &InferRequest{ModelID: "m", Hops: 1}, nil)
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("client forwarded a forwarded request: %v", err)
	}
	// A peer that ignores the rule anyway is refused by the server.
	s := rawStream(t, hs[0], hs[1].ID())
	req := &InferRequest{ModelID: "m", Prompt: []int32{1}, Hops: 2}
	if err := WriteFrame(s, FrameInferRequest, req.AppendBinary(nil, time.Now()), DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bufio.NewReader(s), DefaultMaxFrame)
	if err != nil || f.Type != FrameError {
		t.Fatalf("got %v %v, want an error frame", f.Type, err)
	}
	ie, err := DecodeInferError(f.Payload)
	if err != nil || ie.Code != ErrBadRequest {
		t.Fatalf("got %+v %v, want ErrBadRequest", ie, err)
	}
	if called {
		t.Fatal("handler ran a request over the hop limit")
	}
}

func rawStream(t *testing.T, from host.Host, to peer.ID) interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
} {
	t.Helper()
	s, err := from.NewStream(context.Background(), to, InferProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Reset() })
	return s
}

func TestInferGarbageResetsOnlyThatStream(t *testing.T) {
	hs := mockHosts(t, 2)
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		return &InferFinal{PromptTokens: len(req.Prompt), FinishReason: "stop"}, nil
	}
	client, svc := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	for i, garbage := range [][]byte{
		{0x00},                                 // zero-length frame
		{0xff, 0xff, 0xff, 0xff, 0x7f},         // oversize claim
		AppendFrame(nil, FrameInferPiece, nil), // wrong frame type first
		{0x05, 0x01, 0x01},                     // truncated, then the client closes
	} {
		s, err := hs[0].NewStream(context.Background(), hs[1].ID(), InferProtocol)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(garbage); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		buf := make([]byte, 16)
		n, err := s.Read(buf)
		if err == nil || n > 0 {
			t.Fatalf("garbage %d: server answered %d bytes, %v; want a reset", i, n, err)
		}
		_ = s.Reset()
	}
	pollUntil(t, 10*time.Second, "4 reset streams", func() bool { return svc.Stats().Reset == 4 })
	fin, err := client.Infer(context.Background(), hs[1].ID(), &InferRequest{ModelID: "m", Prompt: []int32{1, 2}}, nil)
	if err != nil || fin.PromptTokens != 2 {
		t.Fatalf("service stopped serving after garbage: %+v %v", fin, err)
	}
}

func TestInferMalformedPayloadIsBadRequest(t *testing.T) {
	hs := mockHosts(t, 2)
	client, _ := inferPair(t, hs, func(context.Context, peer.ID, *InferRequest, func(InferPiece) error) (*InferFinal, error) {
		return &InferFinal{}, nil
	}, InferServiceOptions{}, InferClientOptions{})
	_ = client
	s := rawStream(t, hs[0], hs[1].ID())
	if err := WriteFrame(s, FrameInferRequest, []byte{9, 9, 9}, DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bufio.NewReader(s), DefaultMaxFrame)
	if err != nil || f.Type != FrameError {
		t.Fatalf("got %v %v", f.Type, err)
	}
	if ie, _ := DecodeInferError(f.Payload); ie == nil || ie.Code != ErrBadRequest {
		t.Fatalf("got %+v, want ErrBadRequest", ie)
	}
}

func TestInferStreamLimits(t *testing.T) {
	hs := mockHosts(t, 3)
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &InferFinal{FinishReason: "stop"}, nil
	}
	svc := NewInferService(hs[1], handler, InferServiceOptions{MaxStreams: 2, MaxStreamsPerPeer: 1, BusyRetryAfter: 3 * time.Second})
	t.Cleanup(func() { _ = svc.Close() })
	c0, c2 := NewInferClient(hs[0], InferClientOptions{}), NewInferClient(hs[2], InferClientOptions{})
	req := &InferRequest{ModelID: "m", Prompt: []int32{1}}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(1)
	go func() { defer wg.Done(); _, err := c0.Infer(context.Background(), hs[1].ID(), req, nil); errs <- err }()
	<-started
	// Same peer again: over the per-peer limit.
	_, err := c0.Infer(context.Background(), hs[1].ID(), req, nil)
	var ie *InferError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &ie) || ie.RetryAfter != 3*time.Second {
		t.Fatalf("second stream from one peer: %v, want ErrBusy with RetryAfter 3s", err)
	}
	// Another peer: allowed (total limit 2).
	wg.Add(1)
	go func() { defer wg.Done(); _, err := c2.Infer(context.Background(), hs[1].ID(), req, nil); errs <- err }()
	<-started
	if s := svc.Stats(); s.Active != 2 || s.Refused != 1 {
		t.Fatalf("stats %+v", s)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestInferCloseCancelsHandlers(t *testing.T) {
	hs := mockHosts(t, 2)
	started := make(chan struct{})
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	client, svc := inferPair(t, hs, handler, InferServiceOptions{}, InferClientOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := client.Infer(context.Background(), hs[1].ID(), &InferRequest{ModelID: "m", Prompt: []int32{1}}, nil)
		errc <- err
	}()
	<-started
	if err := svc.Close(); err != nil { // returns only after the handler did
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("request survived the service's close")
	}
}

// frameConn's deadlines apply to every read: a peer that sends nothing
// cannot hold a stream.
func TestFrameConnReadDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	fc := newFrameConn(a, DefaultMaxFrame, 20*time.Millisecond, 20*time.Millisecond)
	if _, err := fc.readFrame(0); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if err := fc.writeFrame(FrameInferPiece, []byte{1}); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a peer that does not read: %v, want a deadline error", err)
	}
}

// Over real TCP streams (yamux, which honours deadlines), a request is
// served and a silent client is cut off after RequestTimeout.
func TestInferOverTCP(t *testing.T) {
	newHost := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	a, b := newHost(), newHost()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		if err := send(InferPiece{Text: "ok", Tokens: 1}); err != nil {
			return nil, err
		}
		return &InferFinal{GeneratedTokens: 1, FinishReason: "stop"}, nil
	}
	client, svc := inferPair(t, []host.Host{a, b}, handler, InferServiceOptions{RequestTimeout: 100 * time.Millisecond}, InferClientOptions{})
	fin, err := client.Infer(context.Background(), b.ID(), &InferRequest{ModelID: "m", Prompt: []int32{1}}, nil)
	if err != nil || fin.GeneratedTokens != 1 {
		t.Fatalf("%+v %v", fin, err)
	}
	s, err := a.NewStream(context.Background(), b.ID(), InferProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	// Send only the protocol header's worth of nothing: the server must
	// give up on its own.
	_, _ = s.Write([]byte{0x05})
	if _, err := s.Read(make([]byte, 1)); err == nil {
		t.Fatal("server kept a silent stream open")
	}
	pollUntil(t, 10*time.Second, "the silent stream to count as reset", func() bool { return svc.Stats().Reset == 1 })
}

// BenchmarkInferStream measures the protocol's own cost per forwarded
// request over an in-process mocknet link: a 2,000-token prompt, 16 pieces.
func BenchmarkInferStream(b *testing.B) {
	mn, err := mocknetFull(2)
	if err != nil {
		b.Fatal(err)
	}
	defer mn.Close()
	hs := mn.Hosts()
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		for range 16 {
			if err := send(InferPiece{Text: " word", Tokens: 1}); err != nil {
				return nil, err
			}
		}
		return &InferFinal{PromptTokens: len(req.Prompt), GeneratedTokens: 16, FinishReason: "length"}, nil
	}
	svc := NewInferService(hs[1], handler, InferServiceOptions{})
	defer svc.Close()
	client := NewInferClient(hs[0], InferClientOptions{})
	req := sampleRequest()
	req.Hops = 0
	req.Deadline = time.Time{}
	req.Prompt = make([]int32, 2000)
	for i := range req.Prompt {
		req.Prompt[i] = int32(i * 37 % 32000)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Infer(context.Background(), hs[1].ID(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInferStaleAddrsFailFast: a peer restarted on new ports leaves its
// old addresses in the client's peerstore. TCP to them is refused at once,
// but QUIC to a closed UDP port hears nothing: without the client's own
// dial bound the stream open waited for the host's DialTimeout, and the
// router's first-piece watchdog, before falling back. The test gives the
// host a one-minute DialTimeout and the client a short bound, and checks
// which of the two ended the call: a ratio of 60 between them leaves a
// loaded CI machine (race detector, parallel packages) all the slack it
// needs, so this is no wall-clock speed assertion.
func TestInferStaleAddrsFailFast(t *testing.T) {
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	ca := testConfig(true)
	ca.DialTimeout = time.Minute // the host's own bound: what the client must not wait for
	a := newTestHost(t, ca)
	cb := testConfig(true)
	cb.Identity = priv
	old, err := New(context.Background(), cb)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.LibP2P().Connect(context.Background(), peer.AddrInfo{ID: old.ID(), Addrs: old.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the old connection to close", func() bool { return !connected(a, old.ID()) })
	restarted := newTestHost(t, cb) // same identity, new ports
	NewInferService(restarted.LibP2P(), func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		return &InferFinal{GeneratedTokens: 1, FinishReason: "stop"}, nil
	}, InferServiceOptions{})
	client := NewInferClient(a.LibP2P(), InferClientOptions{DialTimeout: time.Second})
	start := time.Now()
	_, err = client.Infer(context.Background(), restarted.ID(), &InferRequest{ModelID: "m", Prompt: []int32{1}}, nil)
	if took := time.Since(start); err == nil || took > ca.DialTimeout/2 {
		t.Fatalf("infer to stale addresses: %v after %v; want the client's 1 s dial bound to end it, not the host's %v", err, took, ca.DialTimeout)
	}
	// Once the fresh addresses are known, the same client reaches it.
	a.LibP2P().Peerstore().AddAddrs(restarted.ID(), restarted.Addrs(), time.Minute)
	if fin, err := client.Infer(context.Background(), restarted.ID(), &InferRequest{ModelID: "m", Prompt: []int32{1}}, nil); err != nil || fin.GeneratedTokens != 1 {
		t.Fatalf("after learning fresh addresses: %+v %v", fin, err)
	}
}
