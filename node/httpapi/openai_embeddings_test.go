package httpapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/openai/openai-go/v3"
)

// fakeVector is the fake's embedding of tokens.
func fakeVector(t *testing.T, eng *fakeEngine, tokens []int32) []float32 {
	t.Helper()
	v, err := eng.Embed(context.Background(), [][]int32{tokens})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func near64(a []float64, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-float64(b[i])) > tol {
			return false
		}
	}
	return true
}

func norm64(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func TestOpenAIEmbeddings(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	texts := []string{"the quick fox", "a lazy dog"}
	params := openai.EmbeddingNewParams{Model: "stories260K", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		User: openai.String("u1")}
	resp, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Model != "stories260K" || resp.Object != "list" {
		t.Fatalf("response %+v", resp)
	}
	tokens := 0
	for i, d := range resp.Data {
		toks, _ := eng.Tokenize(texts[i])
		tokens += len(toks)
		if d.Index != int64(i) || !near64(d.Embedding, fakeVector(t, eng, toks), 1e-6) {
			t.Errorf("input %d: %+v", i, d)
		}
	}
	if resp.Usage.PromptTokens != int64(tokens) || resp.Usage.TotalTokens != int64(tokens) {
		t.Errorf("usage %+v, want %d tokens", resp.Usage, tokens)
	}

	// base64: little-endian float32s, which the SDK decodes to the same values.
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range resp.Data {
		if raw := b64.Data[i].JSON.Embedding.Raw(); len(raw) == 0 || raw[0] != '"' {
			t.Errorf("base64 embedding %d is not a string: %s", i, raw)
		}
		if !near64(b64.Data[i].Embedding, toFloat32s(resp.Data[i].Embedding), 0) {
			t.Errorf("base64 embedding %d = %v, float %v", i, b64.Data[i].Embedding, resp.Data[i].Embedding)
		}
	}

	// dimensions: the leading values, renormalised.
	params.EncodingFormat, params.Dimensions = "", openai.Int(3)
	short, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	full := resp.Data[0].Embedding
	got := short.Data[0].Embedding
	scale := norm64(full[:3])
	if len(got) != 3 || math.Abs(norm64(got)-1) > 1e-6 || math.Abs(got[1]*scale-full[1]) > 1e-6 {
		t.Errorf("dimensions 3: %v from %v", got, full)
	}

	// Token arrays go to the engine as they are.
	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "stories260K",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{5, 6, 7}, {8}}}})
	if err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	last := eng.embedded[len(eng.embedded)-2:]
	eng.mu.Unlock()
	if len(last[0]) != 3 || last[0][2] != 7 || len(last[1]) != 1 || last[1][0] != 8 {
		t.Errorf("token inputs reached the engine as %v", last)
	}
}

func toFloat32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// plainGenerator hides the fake's Embed method: a Generator that serves
// no embeddings.
type plainGenerator struct{ Generator }

func TestOpenAIEmbeddingsUnsupported(t *testing.T) {
	srv, err := NewServer(DefaultConfig(), plainGenerator{newFakeEngine()})
	if err != nil {
		t.Fatal(err)
	}
	url := httptestServer(t, srv.Handler())
	client := openAIClient(url)
	_, err = client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "stories260K",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotImplemented || apiErr.Code != "embeddings_not_supported" {
		t.Errorf("not an Embedder: %v", err)
	}

	// An engine that says so at run time answers the same.
	_, eng, url2 := newTestServer(t)
	eng.set(func(f *fakeEngine) { f.embedErr = infer.ErrUnsupported })
	client2 := openAIClient(url2)
	_, err = client2.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "stories260K",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotImplemented {
		t.Errorf("ErrUnsupported: %v", err)
	}
}
