package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/api"
)

// newGenServer serves gen (set up before the server reads its Info).
func newGenServer(t *testing.T, gen Generator, opts ...Option) (*Server, string) {
	t.Helper()
	srv, err := NewServer(DefaultConfig(), gen, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return srv, httptestServer(t, srv.Handler())
}

// hermesReply is a reply in the Hermes tool-call format, split so the
// marker straddles pieces.
var hermesReply = []string{"Let me check.", "\n<tool", "_call>\n", `{"name": "get_weather", `,
	`"arguments": {"city": "Paris", "days": 2}}`, "\n</tool_call>"}

func weatherTool() api.Tool {
	props := api.NewToolPropertiesMap()
	props.Set("city", api.ToolProperty{Type: api.PropertyType{"string"}, Description: "the city"})
	props.Set("days", api.ToolProperty{Type: api.PropertyType{"integer"}})
	return api.Tool{Type: "function", Function: api.ToolFunction{Name: "get_weather", Description: "Get the weather",
		Parameters: api.ToolFunctionParameters{Type: "object", Required: []string{"city"}, Properties: props}}}
}

func newToolServer(t *testing.T) (*renderGen, *api.Client) {
	t.Helper()
	g := newRenderGen(4096)
	g.info.ToolFormat = string(infer.ToolFormatHermes)
	g.reply = hermesReply
	_, base := newGenServer(t, g)
	return g, ollamaClient(t, base)
}

func TestOllamaChatToolsStreamed(t *testing.T) {
	g, client := newToolServer(t)
	args := api.NewToolCallFunctionArguments()
	args.Set("city", "Oslo")
	history := []api.Message{
		{Role: "user", Content: "Weather in Oslo?"},
		{Role: "assistant", ToolCalls: []api.ToolCall{{ID: "call_1", Function: api.ToolCallFunction{Name: "get_weather", Arguments: args}}}},
		{Role: "tool", Content: "sunny", ToolName: "get_weather", ToolCallID: "call_1"},
		{Role: "user", Content: "And Paris?"},
	}
	var chunks []api.ChatResponse
	err := client.Chat(context.Background(), &api.ChatRequest{Model: "stories260K", Messages: history, Tools: api.Tools{weatherTool()}},
		func(r api.ChatResponse) error { chunks = append(chunks, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	var content strings.Builder
	var calls []api.ToolCall
	callChunk := -1
	for i, c := range chunks {
		content.WriteString(c.Message.Content)
		if len(c.Message.ToolCalls) > 0 {
			calls = append(calls, c.Message.ToolCalls...)
			callChunk = i
		}
	}
	if content.String() != "Let me check." {
		t.Errorf("content %q", content.String())
	}
	if len(calls) != 1 || callChunk != len(chunks)-2 {
		t.Fatalf("calls %+v in chunk %d of %d", calls, callChunk, len(chunks))
	}
	c := calls[0]
	if c.Function.Name != "get_weather" || c.ID == "" || c.Function.Index != 0 {
		t.Errorf("call %+v", c)
	}
	if city, _ := c.Function.Arguments.Get("city"); city != "Paris" {
		t.Errorf("arguments %s", c.Function.Arguments.String())
	}
	if days, _ := c.Function.Arguments.Get("days"); days != float64(2) {
		t.Errorf("days %v", days)
	}
	final := chunks[len(chunks)-1]
	if !final.Done || final.DoneReason != "stop" {
		t.Errorf("final %+v", final)
	}
	// The history reached the template: the call, its arguments, the
	// tool's answer, and the tools offered.
	prompt := promptText(g.lastRequest().Prompt)
	for _, want := range []string{`<|tool get_weather|>`, `<call get_weather {"city":"Oslo"}>`, "<|tool|>sunny", "<|user|>And Paris?"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	g.mu.Lock()
	tools := g.tools
	g.mu.Unlock()
	if len(tools) != 1 || tools[0].Name != "get_weather" || !strings.Contains(string(tools[0].Parameters), `"city"`) {
		t.Errorf("tools rendered %+v", tools)
	}
}

func TestOllamaChatToolsNotStreamed(t *testing.T) {
	_, client := newToolServer(t)
	stream := false
	var replies []api.ChatResponse
	err := client.Chat(context.Background(), &api.ChatRequest{Model: "stories260K", Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: "Paris?"}}, Tools: api.Tools{weatherTool()}},
		func(r api.ChatResponse) error { replies = append(replies, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 1 {
		t.Fatalf("%d replies", len(replies))
	}
	m := replies[0].Message
	if m.Content != "Let me check." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "get_weather" || replies[0].DoneReason != "stop" {
		t.Errorf("reply %+v", replies[0])
	}
}

func TestOllamaChatWithoutToolsKeepsMarkup(t *testing.T) {
	// Without tools offered, the reply is all content, markers included.
	g, client := newToolServer(t)
	stream := false
	var got api.ChatResponse
	err := client.Chat(context.Background(), &api.ChatRequest{Model: "stories260K", Stream: &stream,
		Messages: []api.Message{{Role: "user", Content: "Paris?"}}}, func(r api.ChatResponse) error { got = r; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.Message.Content != strings.Join(hermesReply, "") || len(got.Message.ToolCalls) != 0 {
		t.Errorf("reply %+v", got.Message)
	}
	if g.lastRequest().Sampling.Constraint != nil {
		t.Errorf("constraint without format or tools")
	}
}

func TestOllamaToolsRefusedWithoutToolFormat(t *testing.T) {
	eng := newFakeEngine()
	eng.info.ToolFormat = "" // a model that does no tool calls
	_, base := newGenServer(t, eng)
	err := ollamaClient(t, base).Chat(context.Background(), &api.ChatRequest{Model: "stories260K",
		Messages: []api.Message{{Role: "user", Content: "hi"}}, Tools: api.Tools{weatherTool()}}, func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "does not support tools") {
		t.Errorf("got %v", err)
	}
}

func TestOllamaFormat(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	noop := func(api.ChatResponse) error { return nil }
	msgs := []api.Message{{Role: "user", Content: "JSON please"}}
	if err := client.Chat(ctx, &api.ChatRequest{Model: "stories260K", Messages: msgs, Format: json.RawMessage(`"json"`)}, noop); err != nil {
		t.Fatal(err)
	}
	if c := eng.lastRequest().Sampling.Constraint; c == nil || c.JSONSchema != `{"type":"object"}` || c.Prefix != "" || c.Suffix != "" {
		t.Errorf("json: constraint %+v", c)
	}
	schema := `{ "type": "object",
	  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
	  "required": ["name", "age"] }`
	if err := client.Chat(ctx, &api.ChatRequest{Model: "stories260K", Messages: msgs, Format: json.RawMessage(schema)}, noop); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}`
	if c := eng.lastRequest().Sampling.Constraint; c == nil || c.JSONSchema != want {
		t.Errorf("schema: constraint %+v", c)
	}
	err := client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "x", Format: json.RawMessage(`"json"`)},
		func(api.GenerateResponse) error { return nil })
	if c := eng.lastRequest().Sampling.Constraint; err != nil || c == nil || c.JSONSchema != `{"type":"object"}` {
		t.Errorf("generate json: %+v %v", c, err)
	}
	// "" and null are no format.
	post(t, base, "/api/generate", `{"model":"stories260K","prompt":"x","format":"","stream":false}`)
	if c := eng.lastRequest().Sampling.Constraint; c != nil {
		t.Errorf("empty format: %+v", c)
	}
}

func TestOllamaSamplingOptions(t *testing.T) {
	_, eng, base := newTestServer(t)
	status, _, body := post(t, base, "/api/generate", `{"model":"stories260K","prompt":"x","stream":false,
		"options":{"presence_penalty":0.5,"frequency_penalty":-1.5,"repeat_penalty":1.1,"repeat_last_n":100000}}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	s := eng.lastRequest().Sampling
	if s.PresencePenalty != 0.5 || s.FrequencyPenalty != -1.5 || s.RepeatLastN != 512 {
		t.Errorf("sampling %+v", s)
	}
	post(t, base, "/api/generate", `{"model":"stories260K","prompt":"x","stream":false,"options":{"repeat_last_n":-1,"num_ctx":256}}`)
	if s := eng.lastRequest().Sampling; s.RepeatLastN != 256 {
		t.Errorf("repeat_last_n -1 under num_ctx 256: %d", s.RepeatLastN)
	}
}

// TestOllamaBadInput sends bad values of every field this API added; each
// is a 400 in Ollama's error shape naming what is wrong.
func TestOllamaBadInput(t *testing.T) {
	g := newRenderGen(512)
	g.info.ToolFormat = string(infer.ToolFormatHermes)
	_, base := newGenServer(t, g)
	chat := func(extra string) string {
		return `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	huge := `{"description":"` + strings.Repeat("x", infer.MaxSchemaBytes) + `"}`
	cases := []struct{ name, path, body, want string }{
		{"tools not an array", "/api/chat", chat(`,"tools":"x"`), "tools"},
		{"tool type", "/api/chat", chat(`,"tools":[{"type":"retrieval","function":{"name":"f"}}]`), "retrieval"},
		{"tool without name", "/api/chat", chat(`,"tools":[{"type":"function","function":{}}]`), "tool name"},
		{"tool bad name", "/api/chat", chat(`,"tools":[{"type":"function","function":{"name":"a b"}}]`), "a b"},
		{"duplicate tools", "/api/chat", chat(`,"tools":[{"function":{"name":"f"}},{"function":{"name":"f"}}]`), "duplicate"},
		{"tool parameters", "/api/chat", chat(`,"tools":[{"function":{"name":"f","parameters":[1]}}]`), "parameters"},
		{"tool call arguments string", "/api/chat", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}]}`, "JSON object"},
		{"tool call without name", "/api/chat", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]},{"role":"user","content":"x"}]}`, "name is required"},
		{"tool calls on a user message", "/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"x","tool_calls":[{"function":{"name":"f"}}]}]}`, "only assistant"},
		{"role", "/api/chat", `{"model":"stories260K","messages":[{"role":"function","content":"x"}]}`, "role"},
		{"format string", "/api/chat", chat(`,"format":"xml"`), "invalid format"},
		{"format number", "/api/generate", `{"model":"stories260K","prompt":"x","format":5}`, "invalid format"},
		{"format array", "/api/chat", chat(`,"format":[1]`), "invalid format"},
		{"format too deep", "/api/chat", chat(`,"format":` + deep), "deeper than"},
		{"format too big", "/api/chat", chat(`,"format":` + huge), "at most"},
		{"presence_penalty range", "/api/chat", chat(`,"options":{"presence_penalty":3}`), "presence_penalty"},
		{"frequency_penalty type", "/api/chat", chat(`,"options":{"frequency_penalty":"x"}`), "frequency_penalty"},
		{"repeat_last_n", "/api/chat", chat(`,"options":{"repeat_last_n":-2}`), "repeat_last_n"},
		{"num_ctx negative", "/api/chat", chat(`,"options":{"num_ctx":-1}`), "num_ctx"},
		{"num_ctx type", "/api/generate", `{"model":"stories260K","prompt":"x","options":{"num_ctx":"big"}}`, "num_ctx"},
		{"keep_alive word", "/api/chat", chat(`,"keep_alive":"forever"`), "keep_alive"},
		{"keep_alive bool", "/api/generate", `{"model":"stories260K","prompt":"x","keep_alive":true}`, "keep_alive"},
		{"keep_alive object", "/api/embed", `{"model":"stories260K","input":"x","keep_alive":{}}`, "keep_alive"},
		{"truncate type", "/api/chat", chat(`,"truncate":"yes"`), "truncate"},
		{"embed input number", "/api/embed", `{"model":"stories260K","input":5}`, "input"},
		{"embed input numbers", "/api/embed", `{"model":"stories260K","input":[1,2]}`, "input"},
		{"embed dimensions", "/api/embed", `{"model":"stories260K","input":"x","dimensions":-1}`, "dimensions"},
		{"embed too long", "/api/embed", `{"model":"stories260K","input":"` + strings.Repeat("y", 100) + `","truncate":false}`, "embedding context holds 64"},
		{"embed model", "/api/embed", `{"input":"x"}`, "model is required"},
		{"top_logprobs range", "/api/chat", chat(`,"logprobs":true,"top_logprobs":21`), "top_logprobs"},
		{"logprobs type", "/api/generate", `{"model":"stories260K","prompt":"x","logprobs":"yes"}`, "logprobs"},
		{"embeddings prompt type", "/api/embeddings", `{"model":"stories260K","prompt":5}`, "prompt"},
		{"chat too long without truncate", "/api/chat", `{"model":"stories260K","truncate":false,"messages":[{"role":"user","content":"` +
			strings.Repeat("z", 300) + `"},{"role":"user","content":"` + strings.Repeat("z", 300) + `"}]}`, "context holds 512"},
	}
	for _, c := range cases {
		status, _, body := post(t, base, c.path, c.body)
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("%s: not JSON: %s", c.name, body)
			continue
		}
		msg, _ := m["error"].(string)
		if status != 400 || len(m) != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s (want 400, an error naming %q)", c.name, status, body, c.want)
		}
	}
}

func TestOllamaLogprobs(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	var lps []api.Logprob
	var text strings.Builder
	err := client.Chat(ctx, &api.ChatRequest{Model: "stories260K", Messages: []api.Message{{Role: "user", Content: "hi"}},
		Logprobs: true, TopLogprobs: 2, Options: map[string]any{"num_predict": 4}}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		lps = append(lps, r.Logprobs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One per generated token (the third's text is held back, its
	// logprob comes with the next line), in order.
	if s := eng.lastRequest().Sampling; !s.Logprobs || s.TopLogprobs != 2 {
		t.Errorf("sampling %+v", s)
	}
	if len(lps) != 4 || text.String() != "Once upon a" {
		t.Fatalf("%q: %d logprobs %+v", text.String(), len(lps), lps)
	}
	for i, lp := range lps {
		if want := -float64(i+1) / 10; lp.Logprob < want-1e-6 || lp.Logprob > want+1e-6 || len(lp.TopLogprobs) != 2 || lp.TopLogprobs[0].Token != "alt0" {
			t.Errorf("logprob %d: %+v", i, lp)
		}
	}
	if lps[0].Token != "Once" || string(rune(lps[0].Bytes[0])) != "O" {
		t.Errorf("first token %+v", lps[0])
	}
	stream := false
	var got api.GenerateResponse
	err = client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: "hi", Stream: &stream, Logprobs: true,
		Options: map[string]any{"num_predict": 3}}, func(r api.GenerateResponse) error { got = r; return nil })
	if err != nil || len(got.Logprobs) != 3 || len(got.Logprobs[0].TopLogprobs) != 0 {
		t.Errorf("generate: %+v %v", got.Logprobs, err)
	}
	// top_logprobs without logprobs asks for nothing, as in Ollama.
	post(t, base, "/api/generate", `{"model":"stories260K","prompt":"x","stream":false,"top_logprobs":3}`)
	if s := eng.lastRequest().Sampling; s.Logprobs || s.TopLogprobs != 0 {
		t.Errorf("top_logprobs alone: %+v", s)
	}
}

func TestOllamaThinkRefused(t *testing.T) {
	_, _, base := newTestServer(t)
	for _, think := range []string{`true`, `"high"`} {
		status, _, body := post(t, base, "/api/chat", `{"model":"stories260K","think":`+think+`,"messages":[{"role":"user","content":"x"}]}`)
		if status != 400 || !strings.Contains(string(body), `does not support thinking`) {
			t.Errorf("think %s: %d %s", think, status, body)
		}
	}
	for _, think := range []string{`false`, `null`} {
		if status, _, body := post(t, base, "/api/generate", `{"model":"stories260K","stream":false,"think":`+think+`,"prompt":"x"}`); status != 200 {
			t.Errorf("think %s: %d %s", think, status, body)
		}
	}
	if status, _, _ := post(t, base, "/api/generate", `{"model":"stories260K","think":7,"prompt":"x"}`); status != 400 {
		t.Errorf("think 7: %d", status)
	}
}

func FuzzOllamaToolChatRequest(f *testing.F) {
	fuzzEndpoint(f, "/api/chat",
		`{"model":"stories260K","stream":false,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_name":"f","content":"1"},{"role":"user","content":"x"}]}`,
		`{"model":"stories260K","format":{"type":"object","properties":{"a":{"type":"string"}}},"options":{"num_ctx":64,"num_predict":9999},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"stories260K","format":"json","keep_alive":0,"logprobs":true,"top_logprobs":2,"messages":[{"role":"user","content":"x"}]}`)
}
