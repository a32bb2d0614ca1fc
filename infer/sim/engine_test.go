package sim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
)

var _ infer.Engine = (*Engine)(nil)

// testProfile has round figures so expected times are easy to state.
func testProfile() Profile {
	return Profile{
		Name: "test", ContextLength: 1024, VocabSize: 1000,
		Slots: 2, Parallel: 1, QueueLimit: 2, BatchTokens: 64,
		PrefillBase: 0.010, PrefillToken: 0.001, PrefillAttention: 1e-6,
		DecodeToken: 0.020, DecodeAttention: 2e-6,
	}
}

func newEngine(t *testing.T, p Profile) *Engine {
	t.Helper()
	e, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func collect(t *testing.T, e *Engine, ctx context.Context, req infer.Request) (string, *infer.Result, error) {
	t.Helper()
	var b strings.Builder
	res, err := e.Generate(ctx, req, func(p infer.Piece) error { b.WriteString(p.Text); return nil })
	return b.String(), res, err
}

func tokens(n int, salt int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = 3 + (int32(i)*7919+salt*104729)%997
	}
	return out
}

func TestGenerateTimingsAndCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile()
		e := newEngine(t, p)
		prompt := tokens(200, 1)
		start := time.Now()
		text, res, err := collect(t, e, t.Context(), infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: 5, Seed: 7}})
		if err != nil {
			t.Fatal(err)
		}
		wantPrefill := p.PrefillTime(200, 0)
		var wantDecode time.Duration
		for k := 2; k <= 5; k++ {
			wantDecode += p.DecodeTime(200 + k - 2)
		}
		if res.PrefillDuration != wantPrefill || res.TimeToFirst != wantPrefill || res.DecodeDuration != wantDecode {
			t.Errorf("prefill %v (want %v), ttft %v, decode %v (want %v)", res.PrefillDuration, wantPrefill, res.TimeToFirst, res.DecodeDuration, wantDecode)
		}
		if el := time.Since(start); el != wantPrefill+wantDecode {
			t.Errorf("took %v, want %v", el, wantPrefill+wantDecode)
		}
		if res.PromptTokens != 200 || res.CachedTokens != 0 || res.GeneratedTokens != 5 || res.FinishReason != infer.FinishLength || res.QueueWait != 0 {
			t.Errorf("result %+v", res)
		}
		if text == "" {
			t.Error("no text")
		}
		// The prompt and 4 decoded reply tokens are cached now.
		if got := e.CachedPrefix(prompt); got != 200 {
			t.Errorf("CachedPrefix = %d, want 200", got)
		}
		// A prompt sharing 150 tokens prefills only the rest.
		second := append(append([]int32{}, prompt[:150]...), tokens(50, 2)...)
		_, res2, err := collect(t, e, t.Context(), infer.Request{Prompt: second, Sampling: infer.Sampling{MaxTokens: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if res2.CachedTokens != 150 || res2.PrefillDuration != p.PrefillTime(50, 150) || res2.DecodeDuration != 0 {
			t.Errorf("warm result %+v, want cached 150, prefill %v", res2, p.PrefillTime(50, 150))
		}
		if res2.PrefillDuration >= wantPrefill/2 {
			t.Errorf("warm prefill %v not much faster than cold %v", res2.PrefillDuration, wantPrefill)
		}
		// The same prompt again reuses all but its last token.
		_, res3, _ := collect(t, e, t.Context(), infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: 1}})
		if res3.CachedTokens != 199 {
			t.Errorf("repeat cached %d, want 199", res3.CachedTokens)
		}
		st := e.Stats()
		if st.ServedTotal != 3 || st.Active != 0 || st.Queued != 0 || st.Slots != 2 || st.CacheCells == 0 || st.CacheLimit != 2048 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestDeterministicReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, testProfile())
		req := infer.Request{Prompt: tokens(20, 3), Sampling: infer.Sampling{MaxTokens: 30, Seed: 42}}
		a, _, _ := collect(t, e, t.Context(), req)
		b, _, _ := collect(t, e, t.Context(), req)
		req.Sampling.Seed = 43
		c, _, _ := collect(t, e, t.Context(), req)
		if a != b || a == c || len(strings.Fields(a)) < 10 {
			t.Errorf("replies: %q / %q / %q", a, b, c)
		}
	})
}

func TestStopString(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, testProfile())
		req := infer.Request{Prompt: tokens(20, 4), Sampling: infer.Sampling{MaxTokens: 40, Seed: 1}}
		full, _, _ := collect(t, e, t.Context(), req)
		words := strings.Fields(full)
		stopAt := words[5]
		req.Sampling.Stop = []string{" " + stopAt}
		got, res, err := collect(t, e, t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := full[:strings.Index(full, " "+stopAt)]
		if got != want || res.FinishReason != infer.FinishStop || res.GeneratedTokens >= 40 {
			t.Errorf("stop %q: got %q (%s, %d tokens), want %q", stopAt, got, res.FinishReason, res.GeneratedTokens, want)
		}
	})
}

func TestReplyTokensEOS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile()
		p.ReplyTokens = 8
		e := newEngine(t, p)
		total, stops := 0, 0
		for i := range 50 {
			_, res, err := collect(t, e, t.Context(), infer.Request{Prompt: tokens(10, int32(i)), Sampling: infer.Sampling{Seed: int64(i), MaxTokens: 200}})
			if err != nil {
				t.Fatal(err)
			}
			total += res.GeneratedTokens
			if res.FinishReason == infer.FinishStop {
				stops++
			}
		}
		if mean := float64(total) / 50; stops != 50 || mean < 4 || mean > 16 {
			t.Errorf("mean reply %.1f tokens, %d/50 ended by EOS", mean, stops)
		}
	})
}

func TestQueueAndBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile() // 2 slots, queue 2, 1 compute unit
		e := newEngine(t, p)
		var wg sync.WaitGroup
		results := make([]*infer.Result, 4)
		for i := range 4 {
			wg.Go(func() {
				_, res, err := collect(t, e, t.Context(), infer.Request{Prompt: tokens(100, int32(10+i)), Sampling: infer.Sampling{MaxTokens: 2}})
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				results[i] = res
			})
			synctest.Wait() // admit in order
		}
		st := e.Stats()
		if st.Active != 2 || st.Queued != 2 {
			t.Errorf("stats %+v, want 2 active 2 queued", st)
		}
		if _, err := e.Generate(t.Context(), infer.Request{Prompt: tokens(5, 99)}, func(infer.Piece) error { return nil }); !errors.Is(err, infer.ErrBusy) {
			t.Errorf("fifth request: %v, want ErrBusy", err)
		}
		wg.Wait()
		// With one compute unit, the two admitted requests interleave: the
		// queued ones wait for a slot at least one request's time.
		one := p.PrefillTime(100, 0) + p.DecodeTime(100)
		for i, r := range results {
			if r == nil {
				continue
			}
			if i < 2 && r.QueueWait != 0 || i >= 2 && r.QueueWait < one {
				t.Errorf("request %d queued %v (one request takes %v)", i, r.QueueWait, one)
			}
		}
		if results[1] != nil && results[1].TimeToFirst <= results[1].PrefillDuration-1 {
			t.Errorf("ttft %v < prefill %v", results[1].TimeToFirst, results[1].PrefillDuration)
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, testProfile())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, _, err := collect(t, e, ctx, infer.Request{Prompt: tokens(500, 5), Sampling: infer.Sampling{MaxTokens: 100}})
			done <- err
		}()
		time.Sleep(100 * time.Millisecond) // mid-prefill (500 tokens take ~0.6 s)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want Canceled", err)
		}
		if st := e.Stats(); st.Active != 0 {
			t.Errorf("slot still held: %+v", st)
		}
		// A request cancelled while queued leaves the queue.
		ctx2, cancel2 := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for i := range 3 {
			c := t.Context()
			if i == 2 {
				c = ctx2
			}
			wg.Go(func() {
				collect(t, e, c, infer.Request{Prompt: tokens(50, int32(20+i)), Sampling: infer.Sampling{MaxTokens: 1}})
			})
			synctest.Wait()
		}
		if st := e.Stats(); st.Queued != 1 {
			t.Errorf("queued %d, want 1", st.Queued)
		}
		cancel2()
		synctest.Wait()
		if st := e.Stats(); st.Queued != 0 {
			t.Errorf("queued %d after cancel, want 0", st.Queued)
		}
		wg.Wait()
	})
}

func TestEmitErrorAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := New(testProfile())
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("client gone")
		n := 0
		_, err = e.Generate(t.Context(), infer.Request{Prompt: tokens(10, 6), Sampling: infer.Sampling{MaxTokens: 10}},
			func(infer.Piece) error { n++; return boom })
		if !errors.Is(err, boom) || n != 1 {
			t.Errorf("emit error: %v after %d pieces", err, n)
		}
		done := make(chan error)
		go func() {
			_, _, err := collect(t, e, t.Context(), infer.Request{Prompt: tokens(900, 7), Sampling: infer.Sampling{MaxTokens: 10}})
			done <- err
		}()
		synctest.Wait()
		e.Close()
		if err := <-done; !errors.Is(err, infer.ErrClosed) {
			t.Errorf("in-flight request: %v, want ErrClosed", err)
		}
		if _, err := e.Generate(t.Context(), infer.Request{Prompt: tokens(10, 8)}, func(infer.Piece) error { return nil }); !errors.Is(err, infer.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	})
}

func TestValidation(t *testing.T) {
	e := newEngine(t, testProfile())
	for name, req := range map[string]infer.Request{
		"empty":     {},
		"too long":  {Prompt: tokens(1024, 1)},
		"bad token": {Prompt: []int32{1, 5000}},
	} {
		if _, err := e.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestTokenizer(t *testing.T) {
	tok := NewTokenizer(512)
	a := tok.Encode("Once upon a time, there was")
	if len(a) != 8 || a[0] != TokenBOS {
		t.Errorf("tokens %v", a)
	}
	b := tok.Encode("Once upon a time, there was a girl.")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("not a prefix: %v / %v", a, b)
		}
	}
	for _, id := range b {
		if id < 1 || id >= 512 || (id < firstWord && id != TokenBOS) {
			t.Errorf("id %d out of range", id)
		}
	}
	if got := tok.Encode(""); len(got) != 1 {
		t.Errorf("empty text: %v", got)
	}
	if got := tok.Encode("héllo  wörld\n\n"); len(got) != 5 {
		t.Errorf("unicode: %v", got)
	}
}

func TestTokenizeAndRender(t *testing.T) {
	e := newEngine(t, testProfile())
	text, err := e.Render([]infer.Message{{Role: "user", Content: "Question: 2+2?\nAnswer:"}}, nil)
	if err != nil || text != "Question: 2+2?\nAnswer:" {
		t.Fatalf("render %q %v", text, err)
	}
	tools := []infer.Tool{{Name: "add"}}
	withTools, err := e.Render([]infer.Message{{Role: "user", Content: "2+2?"}}, tools)
	if err != nil || withTools != infer.GenericToolPrompt(tools)+"\n\n2+2?" || e.Info().ToolFormat != string(infer.ToolFormatGeneric) {
		t.Fatalf("render with tools %q %v", withTools, err)
	}
	toks, _ := e.Tokenize(text)
	if len(toks) != 10 {
		t.Errorf("tokens %v", toks)
	}
	if e.Info().Template != "plain" || len(e.Info().ID) != 64 || e.Info().ContextLength != 1024 {
		t.Errorf("info %+v", e.Info())
	}
}

func BenchmarkGenerate(b *testing.B) {
	p := testProfile()
	p.PrefillBase, p.PrefillToken, p.PrefillAttention, p.DecodeToken, p.DecodeAttention = 0, 0, 0, 0, 0
	e, _ := New(p)
	defer e.Close()
	prompt := tokens(500, 1)
	for b.Loop() {
		e.Generate(context.Background(), infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: 16}}, func(infer.Piece) error { return nil })
	}
}
