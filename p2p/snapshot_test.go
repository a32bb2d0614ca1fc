package p2p

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
)

func TestFetchSnapshot(t *testing.T) {
	hs := mockHosts(t, 3)
	a, b, other := hs[0], hs[1], hs[2]
	own := testDigest(b.ID(), cache.KindSnapshot, 4, 9, 1, 2, 3)
	provider := func(_ peer.ID, model string) ([]byte, bool) {
		switch model {
		case testModel:
			return mustMarshal(t, own), true
		case "impostor": // B answers with a snapshot that names another peer
			d := testDigest(other.ID(), cache.KindSnapshot, 1, 1, 5)
			d.Model = model
			return mustMarshal(t, d), true
		case "delta":
			d := testDigest(b.ID(), cache.KindDelta, 1, 1, 5)
			d.Model = model
			return mustMarshal(t, d), true
		case "wrong-model":
			return mustMarshal(t, own), true
		case "garbage":
			return []byte("md garbage"), true
		}
		return nil, false
	}
	svc := NewSnapshotService(b, provider)
	t.Cleanup(func() { _ = svc.Close() })

	got, err := FetchSnapshot(context.Background(), a, b.ID(), testModel)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, own) {
		t.Fatalf("got %+v, want %+v", got, own)
	}
	if _, err := FetchSnapshot(context.Background(), a, b.ID(), "nope"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unknown model: %v", err)
	}
	for _, model := range []string{"impostor", "delta", "wrong-model"} {
		if _, err := FetchSnapshot(context.Background(), a, b.ID(), model); !errors.Is(err, ErrForged) {
			t.Fatalf("%s: got %v, want ErrForged", model, err)
		}
	}
	if _, err := FetchSnapshot(context.Background(), a, b.ID(), "garbage"); !errors.Is(err, cache.ErrMalformed) {
		t.Fatalf("garbage: got %v, want cache.ErrMalformed", err)
	}
	// A cancelled fetch returns the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := FetchSnapshot(ctx, a, b.ID(), testModel); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestSnapshotServiceResetsGarbage(t *testing.T) {
	hs := mockHosts(t, 2)
	calls := 0
	svc := NewSnapshotService(hs[1], func(peer.ID, string) ([]byte, bool) { calls++; return nil, false })
	t.Cleanup(func() { _ = svc.Close() })
	s, err := hs[0].NewStream(context.Background(), hs[1].ID(), SnapshotProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if _, err := s.Write(AppendFrame(nil, FrameInferRequest, []byte{1})); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Read(make([]byte, 8)); err == nil || n > 0 {
		t.Fatalf("server answered a wrong frame type: %d bytes, %v", n, err)
	}
	if calls != 0 {
		t.Fatal("provider called for a garbage request")
	}
}
