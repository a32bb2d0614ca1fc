package p2p

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A remote deadline later than the service's MaxDuration is cut to it: a
// peer cannot hold a serving slot longer by asking for more.
func TestForwardedDeadlineCappedAtMaxDuration(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  time.Duration // InferServiceOptions.MaxDuration (0: the default)
		want time.Duration
		ask  time.Duration // the deadline the origin sends
	}{
		{"default", 0, 10 * time.Minute, 24 * time.Hour},
		{"configured", time.Minute, time.Minute, time.Hour},
		{"none sent", time.Minute, time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := mockHosts(t, 2)
			type seen struct {
				ctxLeft, reqLeft time.Duration
				ok               bool
			}
			got := make(chan seen, 1)
			handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
				dl, ok := ctx.Deadline()
				now := time.Now()
				got <- seen{ctxLeft: dl.Sub(now), reqLeft: req.Deadline.Sub(now), ok: ok}
				return &InferFinal{FinishReason: "stop"}, nil
			}
			client, _ := inferPair(t, hs, handler, InferServiceOptions{MaxDuration: tc.max}, InferClientOptions{})
			req := &InferRequest{ModelID: "m", Prompt: []int32{1}}
			if tc.ask > 0 {
				req.Deadline = time.Now().Add(tc.ask)
			}
			if _, err := client.Infer(context.Background(), hs[1].ID(), req, nil); err != nil {
				t.Fatal(err)
			}
			s := <-got
			// The service measures from the request's arrival, before the
			// handler runs: what is left then is at most the cap.
			if !s.ok || s.ctxLeft > tc.want || s.reqLeft > tc.want {
				t.Errorf("asked for %v: handler's context has %v left (deadline set: %v), request %v; want at most %v",
					tc.ask, s.ctxLeft, s.ok, s.reqLeft, tc.want)
			}
		})
	}
}

// A request frame may not decode to more prompt tokens than the service
// accepts (by default MaxFrame/4): a frame of 1-byte tokens would otherwise
// expand 4 times when decoded.
func TestInferFramePromptTokensBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  InferServiceOptions
		limit int
	}{
		{"default", InferServiceOptions{}, DefaultMaxFrame / 4},
		{"configured", InferServiceOptions{MaxPromptTokens: 1000}, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := mockHosts(t, 2)
			var served atomic.Int64
			handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
				served.Add(1)
				return &InferFinal{PromptTokens: len(req.Prompt), FinishReason: "stop"}, nil
			}
			svc := NewInferService(hs[1], handler, tc.opts)
			t.Cleanup(func() { _ = svc.Close() })
			for _, n := range []int{tc.limit, tc.limit + 1} {
				s := rawStream(t, hs[0], hs[1].ID())
				req := &InferRequest{ModelID: "m", Prompt: make([]int32, n), Hops: 1}
				if err := WriteFrame(s, FrameInferRequest, req.AppendBinary(nil, time.Now()), DefaultMaxFrame); err != nil {
					t.Fatal(err)
				}
				f, err := ReadFrame(bufio.NewReader(s), DefaultMaxFrame)
				if err != nil {
					t.Fatalf("%d tokens: %v", n, err)
				}
				switch {
				case n <= tc.limit && f.Type != FrameInferFinal:
					t.Errorf("%d tokens (the limit): got a %v frame, want it served", n, f.Type)
				case n > tc.limit:
					ie, err := DecodeInferError(f.Payload)
					if f.Type != FrameError || err != nil || ie.Code != ErrBadRequest || !strings.Contains(ie.Message, "tokens") {
						t.Errorf("%d tokens (over the limit): got a %v frame %+v %v, want a bad request naming the tokens", n, f.Type, ie, err)
					}
				}
			}
			if served.Load() != 1 {
				t.Errorf("handler ran %d times, want once (the request within the limit)", served.Load())
			}
		})
	}
}

// memStream is a frameConn's stream over bytes in memory.
type memStream struct{ *bytes.Reader }

func (memStream) Write(p []byte) (int, error)      { return len(p), nil }
func (memStream) SetReadDeadline(time.Time) error  { return nil }
func (memStream) SetWriteDeadline(time.Time) error { return nil }

// worstRequestFrame is the request frame that costs a service the most
// memory to read and decode: as many 1-byte tokens as it decodes (at most
// what fits), every string at its limit, padded to the frame limit
// (decoders ignore trailing bytes).
func worstRequestFrame(t testing.TB, maxTokens int) []byte {
	t.Helper()
	stops := make([]string, MaxStopStrings)
	for i := range stops {
		stops[i] = strings.Repeat("s", MaxStopLen)
	}
	req := &InferRequest{
		ModelID: strings.Repeat("m", MaxModelIDLen),
		Sampling: Sampling{Stop: stops, Constraint: &Constraint{
			JSONSchema: strings.Repeat("j", MaxSchemaLen), Prefix: strings.Repeat("p", MaxAffixLen), Suffix: strings.Repeat("q", MaxAffixLen)}},
		Hops: 1,
	}
	fixed := len(req.AppendBinary(nil, time.Now())) + 8 // the count's varint grows
	req.Prompt = make([]int32, min(maxTokens, DefaultMaxFrame-1-fixed))
	payload := req.AppendBinary(nil, time.Now())
	payload = append(payload, make([]byte, DefaultMaxFrame-1-len(payload))...)
	return AppendFrame(nil, FrameInferRequest, payload)
}

// What one inbound infer stream can make the service hold before its
// handler runs: the frame buffer, the reader's buffer and the decoded
// request, all live at the peak (the decode). The resource manager admits
// DefaultProtocolLimits' infer streams (128, 16 a peer) to this point, so
// the figures below are the worst case for a flood of request frames; the
// docs/security.md figures are these (go test ./p2p -run
// TestInferRequestWorstCaseMemory -v prints them).
func TestInferRequestWorstCaseMemory(t *testing.T) {
	svc := &InferService{opts: InferServiceOptions{}}
	svc.opts.defaults()
	decodes := svc.opts.MaxPromptTokens // the most the service decodes
	if decodes <= 0 {
		decodes = MaxPromptTokens
	}
	frame := worstRequestFrame(t, decodes)
	// Each run is measured on its own and the least is kept: goroutines
	// left by earlier tests can only add to a run's count.
	perStream := math.Inf(1)
	var prompt int
	for range 8 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		fc := newFrameConn(memStream{bytes.NewReader(frame)}, svc.opts.MaxFrame, 0, 0)
		req, _, err := svc.readRequest(fc)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		prompt = len(req.Prompt)
		perStream = min(perStream, float64(after.TotalAlloc-before.TotalAlloc))
	}
	limits := DefaultProtocolLimits()[InferProtocol]
	const mib = 1 << 20
	t.Logf("worst request frame: %d bytes, %d prompt tokens decoded", len(frame), prompt)
	t.Logf("per stream: %.2f MiB; per peer (%d streams): %.1f MiB; all peers (%d streams): %.1f MiB",
		perStream/mib, limits.StreamsPerPeer, perStream*float64(limits.StreamsPerPeer)/mib,
		limits.Streams, perStream*float64(limits.Streams)/mib)
	// The bound docs/security.md states: the frame, as many bytes of
	// decoded tokens, the strings at their limits, and 1% for the rest.
	strs := MaxModelIDLen + MaxStopStrings*MaxStopLen + MaxSchemaLen + 2*MaxAffixLen
	bound := float64(DefaultMaxFrame+4*(DefaultMaxFrame/4)+strs) * 1.01
	if perStream > bound {
		t.Errorf("one stream holds %.2f MiB, more than the %.2f MiB docs/security.md states", perStream/mib, bound/mib)
	}
	if got := perStream * float64(limits.Streams) / mib; got > 270 {
		t.Errorf("worst case over all streams %.0f MiB, docs/security.md says at most 270 MiB", got)
	}
}
