package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
