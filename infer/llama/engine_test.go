package llama

import (
	"context"
	"errors"
	"path/filepath"

	"strings"
	"sync"
	"testing"

	"github.com/meshllm/meshllm/infer"
)

// stories is the real tiny model every engine test uses.
var stories = filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")

func load(t *testing.T, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig(stories)
	cfg.Threads = 1 // tests run beside other test binaries: ggml threads spin, never oversubscribe
	cfg.ContextLength = 256
	if mod != nil {
		mod(&cfg)
	}
	e, err := Load(cfg)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func greedy(n int) infer.Sampling { return infer.Sampling{Temperature: 0, MaxTokens: n, Seed: 1} }

func gen(t *testing.T, e *Engine, prompt string, s infer.Sampling) (string, *infer.Result) {
	t.Helper()
	toks, err := e.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	res, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: s}, func(p infer.Piece) error {
		b.WriteString(p.Text)
		return nil
	})
	if err != nil {
		t.Fatalf("Generate(%q): %v", prompt, err)
	}
	return b.String(), res
}

func TestGenerateStories(t *testing.T) {
	e := load(t, nil)
	text, res := gen(t, e, "Once upon a time", greedy(24))
	if strings.TrimSpace(text) == "" {
		t.Fatal("empty reply")
	}
	if res.GeneratedTokens == 0 || res.GeneratedTokens > 24 || res.PromptTokens < 4 {
		t.Fatalf("bad counts: %+v", res)
	}
	if res.PrefillDuration <= 0 || res.TimeToFirst <= 0 || res.FinishReason == "" {
		t.Fatalf("missing timings: %+v", res)
	}
	t.Logf("reply %q, %+v, decode %.0f tok/s", text, res, res.DecodeTokensPerSecond())
}

// TestCacheReuseIsExact checks both that a repeated prefix is reused and that
// reuse does not change the output: greedy decoding from a cached prefix must
// give the same text as a cold engine.
func TestCacheReuseIsExact(t *testing.T) {
	warm := load(t, nil)
	base := "Once upon a time there was a little girl named Lily. She loved to play outside."
	gen(t, warm, base, greedy(8))
	prompt := base + " One day she saw a big dog"
	text, res := gen(t, warm, prompt, greedy(16))
	baseToks, _ := warm.Tokenize(base)
	if res.CachedTokens < len(baseToks)-1 {
		t.Fatalf("cached %d tokens, want >= %d", res.CachedTokens, len(baseToks)-1)
	}
	cold := load(t, nil)
	want, cres := gen(t, cold, prompt, greedy(16))
	if cres.CachedTokens != 0 {
		t.Fatalf("cold engine reported %d cached tokens", cres.CachedTokens)
	}
	if text != want {
		t.Fatalf("cached reply differs from cold reply:\n got %q\nwant %q", text, want)
	}
}

// TestReuseFromAnySlot: a prefix cached in one slot serves a request that is
// placed in another slot (the copy shares cells).
func TestReuseFromAnySlot(t *testing.T) {
	e := load(t, func(c *Config) { c.Slots = 2 })
	a := "Once upon a time there was a big red ball that liked to bounce"
	gen(t, e, a, greedy(4))
	gen(t, e, "The cat sat on the mat and looked at the sun", greedy(4))
	_, res := gen(t, e, a+" over the hill", greedy(4))
	aToks, _ := e.Tokenize(a)
	if res.CachedTokens < len(aToks)-1 {
		t.Fatalf("cached %d, want >= %d", res.CachedTokens, len(aToks)-1)
	}
	st := e.Stats()
	if st.CacheCells > st.CacheLimit || st.Active != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestConcurrentBatching(t *testing.T) {
	e := load(t, func(c *Config) { c.Slots = 3 })
	prompts := []string{"Once upon a time", "The little dog", "Tom and Sue went", "A big tree", "The sun was hot", "Lily had a toy", "One day"}
	var wg sync.WaitGroup
	errs := make(chan error, len(prompts))
	for _, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks, _ := e.Tokenize(p)
			n := 0
			res, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: greedy(20)}, func(p infer.Piece) error { n += p.Tokens; return nil })
			if err == nil && (res.GeneratedTokens == 0 || n != res.GeneratedTokens) {
				err = errors.New("token accounting mismatch")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.ServedTotal != len(prompts) || st.Active != 0 || st.Queued != 0 {
		t.Fatalf("stats after run: %+v", st)
	}
}

func TestCancelFreesSlot(t *testing.T) {
	e := load(t, func(c *Config) { c.Slots = 1 })
	toks, _ := e.Tokenize("Once upon a time")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := e.Generate(ctx, infer.Request{Prompt: toks, Sampling: greedy(200)}, func(infer.Piece) error {
		n++
		if n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if st := e.Stats(); st.Active != 0 {
		t.Fatalf("slot still held: %+v", st)
	}
	// The only slot is free again: the next request is served.
	gen(t, e, "The dog", greedy(4))
}

func TestErrors(t *testing.T) {
	e := load(t, nil)
	long := strings.Repeat("once upon a time ", 200)
	toks, _ := e.Tokenize(long)
	_, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: greedy(4)}, func(infer.Piece) error { return nil })
	var ce *infer.ContextError
	if !errors.Is(err, infer.ErrContextOverflow) || !errors.As(err, &ce) {
		t.Fatalf("long prompt: err = %v", err)
	}
	_, err = e.Generate(context.Background(), infer.Request{Prompt: []int32{1, 99999}, Sampling: greedy(4)}, func(infer.Piece) error { return nil })
	if !errors.Is(err, infer.ErrBadRequest) {
		t.Fatalf("bad token: err = %v", err)
	}
	if _, err := Load(Config{Model: "/nonexistent.gguf"}); !errors.Is(err, infer.ErrUnknownModel) {
		t.Fatalf("missing model: err = %v", err)
	}
	// Still serving after the errors.
	gen(t, e, "Once upon a time", greedy(4))
}
