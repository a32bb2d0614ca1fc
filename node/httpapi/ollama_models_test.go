package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/api"
)

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func TestOllamaKeepAliveAndPS(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: t0}
	_, base := newGenServer(t, newFakeEngine(), WithClock(clock.now))
	client := ollamaClient(t, base)
	ctx := context.Background()
	expires := func() time.Time {
		t.Helper()
		ps, err := client.ListRunning(ctx)
		if err != nil || len(ps.Models) != 1 {
			t.Fatalf("ps %+v %v", ps, err)
		}
		m := ps.Models[0]
		if m.ContextLength != 512 || m.SizeVRAM != 0 || m.Name != "stories260K" {
			t.Errorf("ps model %+v", m)
		}
		return m.ExpiresAt.UTC()
	}
	// Before any request: the default from now.
	if got := expires(); !got.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("initial expires_at %v", got)
	}
	gen := func(keep *api.Duration) {
		t.Helper()
		if err := client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "hi", KeepAlive: keep},
			func(api.GenerateResponse) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	t1 := t0.Add(time.Hour)
	clock.set(t1)
	gen(&api.Duration{Duration: 30 * time.Minute})
	if got := expires(); !got.Equal(t1.Add(30 * time.Minute)) {
		t.Errorf("keep_alive 30m: %v", got)
	}
	gen(nil) // the default again, refreshed by the request
	if got := expires(); !got.Equal(t1.Add(5 * time.Minute)) {
		t.Errorf("default keep_alive: %v", got)
	}
	gen(&api.Duration{Duration: -1}) // forever
	if got := expires(); got.Year() < t1.Year()+200 {
		t.Errorf("forever: %v", got)
	}
	// Raw wire spellings: a number of seconds, a duration string.
	for _, c := range []struct {
		keep string
		want time.Duration
	}{{`90`, 90 * time.Second}, {`"2h"`, 2 * time.Hour}, {`"45"`, 45 * time.Second}, {`0`, 0}} {
		status, _, body := post(t, base, "/api/chat", `{"model":"stories260K","stream":false,"keep_alive":`+c.keep+`,"messages":[{"role":"user","content":"x"}]}`)
		if status != 200 {
			t.Fatalf("keep_alive %s: %d %s", c.keep, status, body)
		}
		if got := expires(); !got.Equal(t1.Add(c.want)) {
			t.Errorf("keep_alive %s: expires %v, want %v", c.keep, got, t1.Add(c.want))
		}
	}
	// keep_alive 0 and no prompt: "unload" (the model stays listed).
	zero := &api.Duration{Duration: 0}
	var got api.GenerateResponse
	err := client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", KeepAlive: zero}, func(r api.GenerateResponse) error { got = r; return nil })
	if err != nil || got.DoneReason != "unload" || !got.Done {
		t.Errorf("unload: %+v %v", got, err)
	}
	var chat api.ChatResponse
	err = client.Chat(ctx, &api.ChatRequest{Model: "stories260K", KeepAlive: zero}, func(r api.ChatResponse) error { chat = r; return nil })
	if err != nil || chat.DoneReason != "unload" {
		t.Errorf("chat unload: %+v %v", chat, err)
	}
	err = client.Chat(ctx, &api.ChatRequest{Model: "stories260K"}, func(r api.ChatResponse) error { chat = r; return nil })
	if err != nil || chat.DoneReason != "load" {
		t.Errorf("chat load: %+v %v", chat, err)
	}
	if got := expires(); !got.Equal(t1.Add(5 * time.Minute)) {
		t.Errorf("after a load: %v", got)
	}
}

func TestOllamaShowContextAndCapabilities(t *testing.T) {
	eng := newFakeEngine()
	eng.info.ContextLength, eng.info.TrainContextLength = 512, 32768
	eng.info.ToolFormat = string(infer.ToolFormatHermes)
	_, base := newGenServer(t, eng)
	show, err := ollamaClient(t, base).Show(context.Background(), &api.ShowRequest{Model: "stories260K"})
	if err != nil {
		t.Fatal(err)
	}
	mi := show.ModelInfo
	if mi["llama.context_length"] != float64(512) || mi["meshllm.train_context_length"] != float64(32768) ||
		mi["meshllm.embedding_length"] != float64(fakeEmbedWidth) {
		t.Errorf("model_info %v", mi)
	}
	if got := capsOf(show); got != "completion,tools,embedding" {
		t.Errorf("capabilities %q", got)
	}
	if show.Parameters != "num_ctx 512" {
		t.Errorf("parameters %q", show.Parameters)
	}
}

func TestOllamaPull(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	no := false
	for _, stream := range []*bool{nil, &no} {
		var progress int
		err := client.Pull(ctx, &api.PullRequest{Model: "llama3.2", Stream: stream}, func(api.ProgressResponse) error { progress++; return nil })
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != 501 || !strings.Contains(se.ErrorMessage, "cannot get models from the mesh") ||
			!strings.Contains(se.ErrorMessage, "ollama pull") || progress != 0 {
			t.Errorf("stream %v: %v (%d progress lines)", stream, err, progress)
		}
	}
	// Any body, even one that is not JSON, gets the same answer.
	for _, body := range []string{`{"model":"stories260K"}`, `not json`, ``} {
		status, _, b := post(t, base, "/api/pull", body)
		var e struct{ Error string }
		mustJSON(t, b, &e)
		if status != 501 || e.Error != pullUnsupported {
			t.Errorf("body %q: %d %s", body, status, b)
		}
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.requests) != 0 {
		t.Errorf("pull reached the engine")
	}
}
