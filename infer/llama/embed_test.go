package llama

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
	"github.com/ollama/ollama/ml"
)

var embedTexts = []string{
	"Once upon a time there was a little girl named Lily.",
	"The dog ran to the park and played with a ball.",
	"Tom was sad because his toy was broken.",
	"The sun was shining and the birds were singing in the big tree.",
	"She said hello.",
}

func tokenizeAll(t *testing.T, tok func(string) ([]int32, error), texts ...string) [][]int32 {
	t.Helper()
	out := make([][]int32, len(texts))
	for i, s := range texts {
		toks, err := tok(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = toks
	}
	return out
}

func embedOK(t *testing.T, em infer.Embedder, inputs [][]int32) [][]float32 {
	t.Helper()
	vs, err := em.Embed(context.Background(), inputs)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if len(vs) != len(inputs) {
		t.Fatalf("%d vectors for %d inputs", len(vs), len(inputs))
	}
	return vs
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestEmbedStories(t *testing.T) {
	e := load(t, nil)
	var _ infer.Embedder = e
	info := e.Info()
	if info.EmbeddingLength != 64 || info.EmbedContextLength != embedContextChat {
		t.Fatalf("info: embedding length %d, embed context %d; want 64, %d", info.EmbeddingLength, info.EmbedContextLength, embedContextChat)
	}
	in := tokenizeAll(t, e.Tokenize, embedTexts[0], embedTexts[1], embedTexts[0])
	vs := embedOK(t, e, in)
	for i, v := range vs {
		if len(v) != info.EmbeddingLength {
			t.Fatalf("vector %d has %d dims, want %d", i, len(v), info.EmbeddingLength)
		}
		if n := norm(v); math.Abs(n-1) > 1e-5 {
			t.Fatalf("vector %d has norm %g", i, n)
		}
	}
	if d := maxDiff(vs[0], vs[2]); d > 1e-5 {
		t.Fatalf("same text, vectors differ by %g", d)
	}
	if d := maxDiff(vs[0], vs[1]); d < 1e-3 {
		t.Fatalf("different texts, vectors differ by only %g", d)
	}
	again := embedOK(t, e, in[:1])
	if d := maxDiff(vs[0], again[0]); d > 1e-5 {
		t.Fatalf("same text in a later call differs by %g", d)
	}
	// stories260K declares no pooling: the context mean-pools.
	r, err := e.emb.get(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := contextPooling(r.cptr); p != poolingMean {
		t.Fatalf("embedding context pooling %d, want mean (%d)", p, poolingMean)
	}
}

// TestEmbedBatchEqualsSingles embeds more inputs than one decode packs, and
// checks each vector against a call for that input alone.
func TestEmbedBatchEqualsSingles(t *testing.T) {
	e := load(t, nil)
	var texts []string
	for i := range embedMaxSeqs + 8 {
		texts = append(texts, fmt.Sprintf("%s Number %d.", embedTexts[i%len(embedTexts)], i))
	}
	in := tokenizeAll(t, e.Tokenize, texts...)
	if end := packEmbedBatch(in, 0, e.Config().EmbedContextLength, embedMaxSeqs); end >= len(in) || end < 2 {
		t.Fatalf("first batch packs %d of %d inputs; the test wants several batches of several", end, len(in))
	}
	batch := embedOK(t, e, in)
	for _, i := range []int{0, 1, embedMaxSeqs - 1, embedMaxSeqs, len(in) - 1} {
		single := embedOK(t, e, in[i:i+1])
		if d := maxDiff(batch[i], single[0]); d > 1e-4 {
			t.Fatalf("input %d: batched and single vectors differ by %g", i, d)
		}
	}
}

func TestPackEmbedBatch(t *testing.T) {
	in := [][]int32{make([]int32, 3), make([]int32, 4), make([]int32, 2), make([]int32, 8), make([]int32, 1)}
	var got []int
	for start := 0; start < len(in); {
		end := packEmbedBatch(in, start, 8, 2)
		got = append(got, end)
		start = end
	}
	want := []int{2, 3, 4, 5} // {3,4} (2 seqs), {2} (2+8 > 8), {8}, {1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batch ends %v, want %v", got, want)
	}
}

func TestEmbedErrors(t *testing.T) {
	e := load(t, nil)
	n := e.Info().EmbedContextLength
	long := make([]int32, n+1)
	for i := range long {
		long[i] = 100
	}
	_, err := e.Embed(context.Background(), [][]int32{{1, 100}, long})
	var ce *infer.ContextError
	if !errors.As(err, &ce) || ce.PromptTokens != n+1 || ce.ContextLength != n {
		t.Fatalf("over-long input: %v, want a ContextError", err)
	}
	if _, err := e.Embed(context.Background(), [][]int32{{1}, {}}); !errors.Is(err, infer.ErrBadRequest) {
		t.Fatalf("empty input: %v", err)
	}
	if _, err := e.Embed(context.Background(), nil); !errors.Is(err, infer.ErrBadRequest) {
		t.Fatalf("no inputs: %v", err)
	}
	if _, err := e.Embed(context.Background(), [][]int32{{1, 99999}}); !errors.Is(err, infer.ErrBadRequest) {
		t.Fatalf("token outside the vocabulary: %v", err)
	}
	// The longest allowed input fits one decode.
	if vs := embedOK(t, e, [][]int32{long[:n]}); len(vs[0]) != 64 {
		t.Fatalf("full-context input: %d dims", len(vs[0]))
	}
}

// errAfterCtx is a context whose Err turns to Canceled after `after` calls:
// Embed checks it between batches, so this cancels at a chosen batch.
type errAfterCtx struct {
	context.Context
	after int32
	calls atomic.Int32
}

func (c *errAfterCtx) Err() error {
	if c.calls.Add(1) > c.after {
		return context.Canceled
	}
	return nil
}

func TestEmbedCancel(t *testing.T) {
	e := load(t, nil)
	in := tokenizeAll(t, e.Tokenize, embedTexts...)
	for len(in) <= 2*embedMaxSeqs {
		in = append(in, in...)
	}
	ctx := &errAfterCtx{Context: context.Background(), after: 1}
	if _, err := e.Embed(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled after one batch: %v", err)
	}
	if got := ctx.calls.Load(); got != 2 {
		t.Fatalf("Err checked %d times, want 2 (stopped before the second batch)", got)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(cancelled, in[:1]); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	embedOK(t, e, in[:3]) // still serving
}

// TestEmbedConcurrentWithGeneration checks that embeddings and generation
// run at once without changing each other's results.
func TestEmbedConcurrentWithGeneration(t *testing.T) {
	e := load(t, nil)
	in := tokenizeAll(t, e.Tokenize, embedTexts...)
	wantVecs := embedOK(t, e, in)
	wantText, _ := gen(t, e, "Once upon a time", greedy(32))

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				vs, err := e.Embed(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				for i := range vs {
					if d := maxDiff(vs[i], wantVecs[i]); d > 1e-4 {
						errs <- fmt.Errorf("embedder %d: input %d differs by %g", g, i, d)
						return
					}
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks, _ := e.Tokenize("Once upon a time")
			var got []byte
			_, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: greedy(32)}, func(p infer.Piece) error {
				got = append(got, p.Text...)
				return nil
			})
			if err != nil {
				errs <- err
			} else if string(got) != wantText {
				errs <- fmt.Errorf("generation beside embeddings gave %q, want %q", got, wantText)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEmbedAfterClose(t *testing.T) {
	e := load(t, nil)
	in := tokenizeAll(t, e.Tokenize, embedTexts[0])
	embedOK(t, e, in)
	e.Close()
	if _, err := e.Embed(context.Background(), in); !errors.Is(err, infer.ErrClosed) {
		t.Fatalf("Embed after Close: %v", err)
	}
}

func TestLoadEmbedder(t *testing.T) {
	cfg := Config{Model: stories, Threads: 1, EmbedContextLength: 128}
	m, err := LoadEmbedder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var _ infer.Embedder = m
	info := m.Info()
	if info.Name != "stories260K" || info.EmbeddingLength != 64 || info.EmbedContextLength != 128 || info.ID == "" {
		t.Fatalf("info %+v", info)
	}
	in := tokenizeAll(t, m.Tokenize, embedTexts...)
	vs := embedOK(t, m, in)

	e := load(t, nil)
	ref := embedOK(t, e, in)
	for i := range vs {
		if d := maxDiff(vs[i], ref[i]); d > 1e-4 {
			t.Fatalf("input %d: embedder and engine differ by %g", i, d)
		}
	}
	_, err = m.Embed(context.Background(), [][]int32{make([]int32, 129)})
	var ce *infer.ContextError
	if !errors.As(err, &ce) || ce.ContextLength != 128 {
		t.Fatalf("over-long input: %v", err)
	}
	m.Close()
	if _, err := m.Embed(context.Background(), in); !errors.Is(err, infer.ErrClosed) {
		t.Fatalf("Embed after Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestEmbedIsMeanOfTokens checks the pooling against its definition: the
// mean of the per-token hidden states from a context that does not pool.
func TestEmbedIsMeanOfTokens(t *testing.T) {
	e := load(t, nil)
	in := tokenizeAll(t, e.Tokenize, embedTexts[3])[0]
	got := embedOK(t, e, [][]int32{in})[0]

	params := llama.NewContextParams(256, 256, 1, 1, ml.FlashAttentionDisabled, "f16")
	if err := setPooling(&params, poolingNone); err != nil {
		t.Fatal(err)
	}
	lctx, err := llama.NewContextWithModel(e.model, params)
	if err != nil {
		t.Fatal(err)
	}
	cptr, err := contextPtr(lctx)
	if err != nil {
		t.Fatal(err)
	}
	defer freeContext(cptr)
	if p := contextPooling(cptr); p != poolingNone {
		t.Fatalf("reference context pools with %d", p)
	}
	batch, err := llama.NewBatch(len(in), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Free()
	for pos, tok := range in {
		batch.Add(int(tok), nil, pos, true, 0)
	}
	if err := lctx.Decode(batch); err != nil {
		t.Fatal(err)
	}
	mean := make([]float32, len(got))
	for i := range in {
		for j, x := range lctx.GetEmbeddingsIth(i) {
			mean[j] += x / float32(len(in))
		}
	}
	if d := maxDiff(got, infer.Normalize(mean)); d > 1e-4 {
		t.Fatalf("Embed differs from the normalised token mean by %g", d)
	}
}
