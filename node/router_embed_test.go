package node

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// embedEngine is an engine that embeds a sequence as its token values.
type embedEngine struct{ infer.Engine }

func (embedEngine) Embed(_ context.Context, inputs [][]int32) ([][]float32, error) {
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		for _, t := range in {
			out[i] = append(out[i], float32(t))
		}
	}
	return out, nil
}

// TestRouterEmbed: embeddings are served by the local engine when it
// computes them; otherwise the router says it serves none.
func TestRouterEmbed(t *testing.T) {
	eng := newSimEngine(t)
	mesh, err := NewMesh(MeshConfig{Self: "A", Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(RouterConfig{Engine: eng, Mesh: mesh, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Embed(t.Context(), [][]int32{{1, 2}}); !errors.Is(err, infer.ErrUnsupported) {
		t.Fatalf("no embedder: %v, want ErrUnsupported", err)
	}
	r, err = NewRouter(RouterConfig{Engine: embedEngine{eng}, Mesh: mesh, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Embed(t.Context(), [][]int32{{5, 6, 7}})
	if err != nil || len(v) != 1 || len(v[0]) != 3 || v[0][2] != 7 {
		t.Fatalf("embed: %v %v", v, err)
	}
}
