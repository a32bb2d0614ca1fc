package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/api"
)

func ollamaClient(t *testing.T, base string) *api.Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func TestOllamaGenerateStreaming(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	var text strings.Builder
	var final api.GenerateResponse
	lines := 0
	err := client.Generate(ctx, &api.GenerateRequest{
		Model:  "stories260K:latest",
		Prompt: "Tell me a story.",
		System: "You tell stories.",
		Options: map[string]any{
			"temperature": 0.3, "top_p": 0.8, "top_k": 20, "seed": 7, "num_predict": 50,
			"stop": []string{"zzz"}, "repeat_penalty": 1.2, "min_p": 0.1, "num_ctx": 4096,
		},
	}, func(r api.GenerateResponse) error {
		lines++
		text.WriteString(r.Response)
		if r.Done {
			final = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != fullReply || !final.Done || final.DoneReason != "stop" || lines != 10 {
		t.Errorf("text %q, %d lines, final %+v", text.String(), lines, final)
	}
	prompt, _ := eng.Tokenize("<|system|>You tell stories.\n<|user|>Tell me a story.\n<|assistant|>")
	m := final.Metrics
	if m.PromptEvalCount != len(prompt) || m.EvalCount != 10 || m.EvalDuration <= 0 || m.PromptEvalDuration <= 0 || m.TotalDuration <= 0 {
		t.Errorf("metrics %+v", m)
	}
	got := eng.lastRequest().Sampling
	want := infer.Sampling{Temperature: 0.3, TopP: 0.8, TopK: 20, MinP: 0.1, RepeatPenalty: 1.2, Seed: 7, MaxTokens: 50, Stop: []string{"zzz"}}
	if !samplingEqual(got, want) {
		t.Errorf("sampling %+v, want %+v", got, want)
	}
}

func TestOllamaGenerateRawAndCached(t *testing.T) {
	_, eng, base := newTestServer(t)
	// The raw wire carries cached_tokens, which Ollama's types lack.
	body := `{"model":"stories260K","prompt":"Once upon a time","raw":true,"stream":false,"options":{"num_predict":-1}}`
	for i, wantCached := range []int{0, len("Once upon a time")} {
		status, _, b := post(t, base, "/api/generate", body)
		if status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
		var r generateResponse
		mustJSON(t, b, &r)
		if r.Response != fullReply || r.CachedTokens == nil || *r.CachedTokens != wantCached {
			t.Errorf("request %d: %s", i, b)
		}
	}
	if p := eng.lastRequest().Prompt; len(p) != len("Once upon a time")+1 {
		t.Errorf("raw prompt was templated: %d tokens", len(p))
	}
	if s := eng.lastRequest().Sampling; s.MaxTokens != 0 || s.Temperature != -1 || s.Seed != -1 {
		t.Errorf("num_predict -1 and defaults: %+v", s)
	}
}

func TestOllamaChat(t *testing.T) {
	_, _, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	msgs := []api.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"}}
	var text strings.Builder
	var final api.ChatResponse
	err := client.Chat(ctx, &api.ChatRequest{Model: "stories260K", Messages: msgs}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		if r.Message.Role != "assistant" {
			t.Errorf("role %q", r.Message.Role)
		}
		if r.Done {
			final = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != fullReply || final.DoneReason != "stop" || final.EvalCount != 10 {
		t.Errorf("chat %q final %+v", text.String(), final)
	}

	stream := false
	var replies []api.ChatResponse
	err = client.Chat(ctx, &api.ChatRequest{Model: "gpt-4o-mini", Messages: msgs, Stream: &stream,
		Options: map[string]any{"num_predict": 2}}, func(r api.ChatResponse) error {
		replies = append(replies, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 1 || replies[0].Message.Content != "Once upon" || replies[0].DoneReason != "length" || replies[0].Model != "gpt-4o-mini" {
		t.Errorf("non-streamed chat %+v", replies)
	}
	if replies[0].PromptEvalCount == 0 {
		t.Errorf("no prompt_eval_count: %+v", replies[0].Metrics)
	}
}

func TestOllamaLoadOnEmptyPrompt(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	var got api.GenerateResponse
	err := client.Generate(context.Background(), &api.GenerateRequest{Model: "stories260K"}, func(r api.GenerateResponse) error {
		got = r
		return nil
	})
	if err != nil || !got.Done || got.DoneReason != "load" {
		t.Errorf("load: %+v, %v", got, err)
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.requests) != 0 {
		t.Errorf("an empty prompt reached the engine")
	}
}

func TestOllamaInfoEndpoints(t *testing.T) {
	_, _, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	list, err := client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].Name != "stories260K" || list.Models[1].Name != "gpt-4o-mini" ||
		list.Models[0].Details.ParameterSize != "260K" || list.Models[0].Details.Format != "gguf" || list.Models[0].Size != 1<<20 {
		t.Errorf("tags %+v", list.Models)
	}
	ps, err := client.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || ps.Models[0].ContextLength != 512 {
		t.Errorf("ps %+v %v", ps, err)
	}
	show, err := client.Show(ctx, &api.ShowRequest{Model: "stories260K"})
	if err != nil || show.ModelInfo["general.architecture"] != "llama" || show.Details.QuantizationLevel != "F32" {
		t.Errorf("show %+v %v", show, err)
	}
	v, err := client.Version(ctx)
	if err != nil || v != "0.24.0" {
		t.Errorf("version %q %v", v, err)
	}
	if err := client.Heartbeat(ctx); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	_, err = client.Show(ctx, &api.ShowRequest{Model: "nope"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || !strings.Contains(se.ErrorMessage, "not found") {
		t.Errorf("show unknown: %v", err)
	}
}

func TestOllamaErrorsThroughClient(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	noop := func(api.GenerateResponse) error { return nil }
	err := client.Generate(ctx, &api.GenerateRequest{Model: "missing", Prompt: "hi"}, noop)
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("unknown model: %v", err)
	}
	err = client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "hi", Options: map[string]any{"temperature": "hot"}}, noop)
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "temperature") {
		t.Errorf("bad option: %v", err)
	}
	eng.set(func(f *fakeEngine) { f.err = infer.ErrBusy })
	err = client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "hi"}, noop)
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("busy: %v", err)
	}
	// A failure after streaming started arrives as a final error line.
	eng.set(func(f *fakeEngine) { f.err, f.failAfter = nil, 4 })
	var text strings.Builder
	err = client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "hi"}, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "engine failed") || text.String() != "Once upon a" {
		t.Errorf("mid-stream failure: %q, %v", text.String(), err)
	}
}

func TestOllamaStreamWireFormat(t *testing.T) {
	_, _, base := newTestServer(t)
	status, hdr, body := post(t, base, "/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":3}}`)
	if status != 200 || hdr.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, type %q", status, hdr.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if len(lines) != 3 { // "Once", " upon", done (the third token's text is held back)
		t.Fatalf("%d lines:\n%s", len(lines), body)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &last); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"total_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration", "done_reason", "cached_tokens"} {
		if _, ok := last[k]; !ok {
			t.Errorf("final line lacks %s: %s", k, lines[2])
		}
	}
	if last["done"] != true || last["done_reason"] != "length" {
		t.Errorf("final line %s", lines[2])
	}
}
