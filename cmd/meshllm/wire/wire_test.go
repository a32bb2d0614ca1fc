package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/node"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/p2p"
)

// TestErrorMapping: a local error crosses the wire as a typed code and comes
// back as the same infer error kind on the origin, so the router's fallback
// (busy -> cooldown) and the HTTP status mapping see what a local engine
// would have returned.
func TestErrorMapping(t *testing.T) {
	for _, kind := range []error{infer.ErrBusy, infer.ErrUnknownModel, infer.ErrBadRequest, infer.ErrContextOverflow, infer.ErrEngine, context.DeadlineExceeded} {
		local := fmt.Errorf("%w: details", kind)
		wireErr := FromInferError(local)
		var ie *p2p.InferError
		if !errors.As(wireErr, &ie) {
			t.Fatalf("%v: not a wire error: %v", kind, wireErr)
		}
		back := ToInferError(wireErr)
		if !errors.Is(back, kind) {
			t.Fatalf("%v came back as %v", kind, back)
		}
	}
	if got := FromInferError(infer.ErrClosed); !errors.Is(got, p2p.ErrBusy) {
		t.Fatalf("a closing engine should look busy to the origin, got %v", got)
	}
	transport := errors.New("stream reset")
	if got := ToInferError(transport); got != transport {
		t.Fatalf("transport errors pass through unchanged, got %v", got)
	}
}

// TestGossipTrust: 0 before the router exists, then the Trust's score
// for the peer, through the memo and after it starts over.
func TestGossipTrust(t *testing.T) {
	var g GossipTrust
	pid, err := peer.Decode("12D3KooWBJWNpbb73sKEK863SEMya2JdMrGqujE1frZCWrpptzzZ")
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Score(pid); s != 0 {
		t.Fatalf("score before Set: %v", s)
	}
	now := time.Unix(1_000_000, 0)
	cfg := node.DefaultTrustConfig()
	cfg.Now = func() time.Time { return now } // trust recovers with time
	tr, err := node.NewTrust(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // a peer whose claims keep failing
		tr.Observe(node.PeerID(pid.String()), node.Claim{EstimatedCached: 500, TimedOut: true}, now)
	}
	g.Set(tr)
	want := tr.GossipScore(node.PeerID(pid.String()))
	if want >= 0 {
		t.Fatalf("a failing peer's score %v: the test needs a negative one", want)
	}
	for i := range maxTrustIDs + 2 {
		if i > 0 {
			g.id(peer.ID(fmt.Sprint("filler", i))) // fills the memo until it starts over
		}
		if s := g.Score(pid); s != want {
			t.Fatalf("after %d other peers: score %v, want %v", i, s, want)
		}
	}
	if got := g.id(pid); got != node.PeerID(pid.String()) {
		t.Fatalf("id %q", got)
	}
}
