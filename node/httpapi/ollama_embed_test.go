package httpapi

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

// plainGen hides the fake's Embed: a Generator that serves no embeddings.
type plainGen struct{ Generator }

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestOllamaEmbed(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	resp, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: []string{"hello", "world", "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "stories260K" || len(resp.Embeddings) != 3 || resp.PromptEvalCount != 3*6 || resp.TotalDuration <= 0 {
		t.Fatalf("embed %+v", resp)
	}
	for i, v := range resp.Embeddings {
		if len(v) != fakeEmbedWidth || math.Abs(norm(v)-1) > 1e-5 {
			t.Errorf("vector %d: %v (norm %g)", i, v, norm(v))
		}
	}
	if !equalVec(resp.Embeddings[0], resp.Embeddings[2]) || equalVec(resp.Embeddings[0], resp.Embeddings[1]) {
		t.Errorf("equal inputs must give equal vectors, different ones different: %v", resp.Embeddings)
	}
	eng.mu.Lock()
	batched := len(eng.embedded)
	eng.mu.Unlock()
	if batched != 3 {
		t.Errorf("%d inputs reached Embed", batched)
	}

	// One string, dimensions: cut and normalised again.
	one, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: "hello", Dimensions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Embeddings) != 1 || len(one.Embeddings[0]) != 3 || math.Abs(norm(one.Embeddings[0])-1) > 1e-5 {
		t.Errorf("dimensions 3: %v", one.Embeddings)
	}
	// Too long: cut to the embedding context by default.
	long := strings.Repeat("z", 200)
	cut, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: long})
	if err != nil || cut.PromptEvalCount != 64 {
		t.Errorf("truncated embed: %+v %v", cut, err)
	}
	f := false
	_, err = client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: long, Truncate: &f})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "201 tokens") {
		t.Errorf("truncate false: %v", err)
	}
	// No input loads the model.
	empty, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K"})
	if err != nil || empty.Embeddings == nil || len(empty.Embeddings) != 0 {
		t.Errorf("no input: %+v %v", empty, err)
	}
}

func equalVec(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOllamaEmbeddingsLegacy(t *testing.T) {
	_, _, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	resp, err := client.Embeddings(ctx, &api.EmbeddingRequest{Model: "stories260K", Prompt: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Embedding) != fakeEmbedWidth {
		t.Fatalf("embedding %v", resp.Embedding)
	}
	for i, x := range resp.Embedding {
		if float32(x) != batch.Embeddings[0][i] {
			t.Errorf("legacy and batched vectors differ at %d: %g vs %g", i, x, batch.Embeddings[0][i])
		}
	}
	empty, err := client.Embeddings(ctx, &api.EmbeddingRequest{Model: "stories260K"})
	if err != nil || empty.Embedding == nil || len(empty.Embedding) != 0 {
		t.Errorf("empty prompt: %+v %v", empty, err)
	}
	_, err = client.Embeddings(ctx, &api.EmbeddingRequest{Model: "nope", Prompt: "x"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("unknown model: %v", err)
	}
}

func TestOllamaEmbedWithoutEmbedder(t *testing.T) {
	eng := newFakeEngine()
	eng.info.ToolFormat = ""
	_, base := newGenServer(t, plainGen{eng})
	client := ollamaClient(t, base)
	ctx := context.Background()
	_, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: "x"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 501 || !strings.Contains(se.ErrorMessage, "serves no embeddings") {
		t.Errorf("embed: %v", err)
	}
	_, err = client.Embeddings(ctx, &api.EmbeddingRequest{Model: "stories260K", Prompt: "x"})
	if !errors.As(err, &se) || se.StatusCode != 501 || !strings.Contains(se.ErrorMessage, "serves no embeddings") {
		t.Errorf("embeddings: %v", err)
	}
	show, err := client.Show(ctx, &api.ShowRequest{Model: "stories260K"})
	if err != nil || capsOf(show) != "completion" {
		t.Errorf("capabilities %v %v", show, err)
	}
}

// capsOf joins /api/show's capabilities.
func capsOf(show *api.ShowResponse) string {
	var caps []string
	for _, c := range show.Capabilities {
		caps = append(caps, string(c))
	}
	return strings.Join(caps, ",")
}

func TestOllamaEmbedSeparateModel(t *testing.T) {
	gen := newFakeEngine()
	emb := newFakeEngine()
	emb.info.Name, emb.info.EmbeddingLength, emb.info.EmbedContextLength = "nomic-embed", 5, 16
	_, base := newGenServer(t, plainGen{gen}, WithEmbeddings(emb))
	client := ollamaClient(t, base)
	ctx := context.Background()
	resp, err := client.Embed(ctx, &api.EmbedRequest{Model: "stories260K", Input: strings.Repeat("e", 40)})
	if err != nil {
		t.Fatal(err)
	}
	// The embedding model's width and context, not the served model's.
	if len(resp.Embeddings) != 1 || len(resp.Embeddings[0]) != 5 || resp.PromptEvalCount != 16 {
		t.Errorf("embed %+v", resp)
	}
	emb.mu.Lock()
	n := len(emb.embedded)
	emb.mu.Unlock()
	if n != 1 {
		t.Errorf("the embedding model embedded %d inputs", n)
	}
	show, err := client.Show(ctx, &api.ShowRequest{Model: "stories260K"})
	if err != nil || !strings.Contains(capsOf(show), "embedding") {
		t.Errorf("capabilities %v %v", show.Capabilities, err)
	}
}

func FuzzOllamaEmbedRequest(f *testing.F) {
	fuzzEndpoint(f, "/api/embed",
		`{"model":"stories260K","input":["a","b"],"dimensions":3}`,
		`{"model":"stories260K","input":"x","truncate":false,"keep_alive":"5m"}`,
		`{"model":"stories260K","input":[""],"keep_alive":-1}`)
}
