package p2p

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The rate limiter's tests use rtt_test.go's fakeClock.

func okHandler(served *int) InferHandler { return countingHandler(served) }

func countingHandler(served *int) InferHandler {
	return func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		*served++
		return &InferFinal{PromptTokens: len(req.Prompt)}, nil
	}
}

func TestRateLimiterRequests(t *testing.T) {
	clk := newFakeClock()
	l := NewRateLimiter(RateLimits{RequestsPerSec: 2, RequestBurst: 3, Now: clk.Now})
	for i := range 3 {
		if w := l.Admit("a", 10); w != 0 {
			t.Fatalf("request %d of the burst refused, wait %v", i, w)
		}
	}
	if w := l.Admit("a", 10); w != 500*time.Millisecond {
		t.Fatalf("over the burst: wait %v, want 500ms", w)
	}
	// Another peer has its own bucket.
	if w := l.Admit("b", 10); w != 0 {
		t.Fatalf("peer b refused: %v", w)
	}
	clk.Advance(500 * time.Millisecond)
	if w := l.Admit("a", 10); w != 0 {
		t.Fatalf("after the refill: wait %v", w)
	}
	if w := l.Admit("a", 10); w == 0 {
		t.Fatal("bucket should be empty again")
	}
}

func TestRateLimiterPromptTokensDebt(t *testing.T) {
	clk := newFakeClock()
	l := NewRateLimiter(RateLimits{PromptTokensPerSec: 1000, PromptTokenBurst: 2000, Now: clk.Now})
	// A prompt larger than the burst is admitted from a full bucket...
	if w := l.Admit("a", 5000); w != 0 {
		t.Fatalf("big prompt refused: %v", w)
	}
	// ...and the debt (-3000) must be paid off before the next one.
	if w := l.Admit("a", 1); w != 3001*time.Millisecond {
		t.Fatalf("wait %v, want 3.001s", w)
	}
	clk.Advance(3001 * time.Millisecond)
	if w := l.Admit("a", 1); w != 0 {
		t.Fatalf("after paying off: wait %v", w)
	}
}

func TestRateLimiterBoundedPeers(t *testing.T) {
	clk := newFakeClock()
	l := NewRateLimiter(RateLimits{RequestsPerSec: 1, RequestBurst: 1, MaxPeers: 2, Now: clk.Now})
	for _, p := range []peer.ID{"a", "b", "c"} {
		l.Admit(p, 1)
		clk.Advance(time.Millisecond)
	}
	l.mu.Lock()
	_, hasA := l.peers["a"]
	n := len(l.peers)
	l.mu.Unlock()
	if n != 2 || hasA {
		t.Fatalf("%d peers kept, a kept=%v", n, hasA)
	}
}

func TestLimitHandlerAnswersBusy(t *testing.T) {
	clk := newFakeClock()
	served := 0
	h := LimitHandler(okHandler(&served), RateLimits{RequestsPerSec: 1, RequestBurst: 1, Now: clk.Now})
	req := &InferRequest{Prompt: []int32{1, 2, 3}}
	if _, err := h(context.Background(), "a", req, nil); err != nil {
		t.Fatal(err)
	}
	_, err := h(context.Background(), "a", req, nil)
	var ie *InferError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &ie) || ie.RetryAfter != time.Second {
		t.Fatalf("second request: %v", err)
	}
	if served != 1 {
		t.Fatalf("handler ran %d times", served)
	}
}

// TestInferBusyCarriesRetryAfter: the rate limiter's hint reaches the
// origin over a real stream.
func TestInferBusyCarriesRetryAfter(t *testing.T) {
	hs := mockHosts(t, 2)
	served := 0
	clk := newFakeClock()
	client, _ := inferPair(t, hs, LimitHandler(okHandler(&served), RateLimits{RequestsPerSec: 0.5, RequestBurst: 1, Now: clk.Now}),
		InferServiceOptions{}, InferClientOptions{})
	req := &InferRequest{ModelID: "m", Prompt: []int32{1}}
	if _, err := client.Infer(context.Background(), hs[1].ID(), req, nil); err != nil {
		t.Fatal(err)
	}
	_, err := client.Infer(context.Background(), hs[1].ID(), req, nil)
	var ie *InferError
	if !errors.As(err, &ie) || ie.Code != ErrBusy || ie.RetryAfter < time.Second {
		t.Fatalf("over the rate: %v (%+v)", err, ie)
	}
}

func TestProtocolLimitsReachResourceManager(t *testing.T) {
	r := DefaultConfig().Resources
	cfg := resourceLimits(&r).ToPartialLimitConfig()
	def := DefaultProtocolLimits()[InferProtocol]
	if got := cfg.Protocol[InferProtocol].StreamsInbound; int(got) != def.Streams {
		t.Fatalf("infer protocol inbound streams %v, want %d", got, def.Streams)
	}
	if got := cfg.ProtocolPeer[InferProtocol].StreamsInbound; int(got) != def.StreamsPerPeer {
		t.Fatalf("infer protocol per-peer inbound streams %v, want %d", got, def.StreamsPerPeer)
	}
	if got := cfg.ProtocolPeer[MemberProtocol].StreamsInbound; got <= 0 {
		t.Fatalf("member protocol per-peer streams %v", got)
	}
	// An empty map opts out: libp2p's defaults stay.
	r.Protocols = map[protocol.ID]ProtocolLimit{}
	if got := resourceLimits(&r).ToPartialLimitConfig().ProtocolPeer[InferProtocol].StreamsInbound; int(got) == def.StreamsPerPeer {
		t.Fatal("empty Protocols still applied the defaults")
	}
}
