package httpapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

func TestOpenAIResponseFormatJSONSchema(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}},
		"required":             []string{"name", "age"},
		"additionalProperties": false,
	}
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Strict: openai.Bool(true), Schema: schema},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := eng.lastRequest().Sampling.Constraint
	want := `{"additionalProperties":false,"properties":{"age":{"type":"integer"},"name":{"type":"string"}},"required":["name","age"],"type":"object"}`
	if c == nil || c.JSONSchema != want || c.Prefix != "" || c.Suffix != "" {
		t.Errorf("constraint %+v, want schema %s", c, want)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := eng.lastRequest().Sampling.Constraint; c == nil || c.JSONSchema != `{"type":"object"}` {
		t.Errorf("json_object: constraint %+v", c)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Who?")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfText: &shared.ResponseFormatTextParam{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := eng.lastRequest().Sampling.Constraint; c != nil {
		t.Errorf("text: constraint %+v", c)
	}
}

func TestOpenAIPenalties(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		PresencePenalty: openai.Float(0.5), FrequencyPenalty: openai.Float(-1.5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := eng.lastRequest().Sampling; s.PresencePenalty != 0.5 || s.FrequencyPenalty != -1.5 {
		t.Errorf("penalties %v %v", s.PresencePenalty, s.FrequencyPenalty)
	}
	_, err = client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "stories260K", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
		PresencePenalty: openai.Float(2), FrequencyPenalty: openai.Float(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := eng.lastRequest().Sampling; s.PresencePenalty != 2 || s.FrequencyPenalty != 1 {
		t.Errorf("completions penalties %v %v", s.PresencePenalty, s.FrequencyPenalty)
	}
}

func TestOpenAISystemFingerprint(t *testing.T) {
	_, _, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	a, err := client.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories260K", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
	if err != nil {
		t.Fatal(err)
	}
	fp := a.SystemFingerprint
	if len(fp) != 13 || !strings.HasPrefix(fp, "fp_") || b.SystemFingerprint != fp {
		t.Errorf("fingerprints %q and %q", fp, b.SystemFingerprint)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, chat)
	for stream.Next() {
		if got := stream.Current().SystemFingerprint; got != fp {
			t.Errorf("chunk fingerprint %q, want %q", got, fp)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	// Another model gets another one.
	_, _, url2 := newTestServerWith(t, func(f *fakeEngine) { f.info.ID = "sha256:other" })
	client2 := openAIClient(url2)
	c, err := client2.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if c.SystemFingerprint == fp {
		t.Errorf("two models share fingerprint %q", fp)
	}
}

// newTestServerWith is newTestServer with the fake engine changed before
// the server reads it.
func newTestServerWith(t *testing.T, eng func(*fakeEngine), mod ...func(*Config)) (*Server, *fakeEngine, string) {
	t.Helper()
	f := newFakeEngine()
	eng(f)
	cfg := DefaultConfig()
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := NewServer(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	return srv, f, httptestServer(t, srv.Handler())
}

func TestOpenAIRefusalNull(t *testing.T) {
	_, _, url := newTestServer(t)
	status, _, body := post(t, url, "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !strings.Contains(string(body), `"refusal":null`) || !strings.Contains(string(body), `"logprobs":null`) {
		t.Errorf("%d %s", status, body)
	}
	status, _, body = post(t, url, "/v1/chat/completions", `{"model":"stories260K","stream":true,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	first, _, _ := strings.Cut(string(body), "\n\n")
	if status != 200 || !strings.Contains(first, `"delta":{"role":"assistant","content":"Once","refusal":null}`) {
		t.Errorf("first chunk %s", first)
	}
	if strings.Count(string(body), "refusal") != 1 {
		t.Errorf("refusal in more than the first delta: %s", body)
	}
}

func TestOpenAIMaxTokensClamped(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	long := strings.Repeat("x", 485) // with the template and BOS, 4 tokens short of the 512 context
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(long)},
		MaxTokens: openai.Int(4096),
	})
	if err != nil {
		t.Fatal(err)
	}
	room := 512 - len(eng.lastRequest().Prompt)
	if got := eng.lastRequest().Sampling.MaxTokens; got != room || room < 1 || room >= 10 {
		t.Errorf("max_tokens 4096 became %d, the room left is %d", got, room)
	}
	if resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != int64(room) {
		t.Errorf("finish %q after %d tokens", resp.Choices[0].FinishReason, resp.Usage.CompletionTokens)
	}
	// max_completion_tokens and the legacy endpoint clamp too.
	_, err = client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "stories260K", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")}, MaxTokens: openai.Int(100000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := eng.lastRequest().Sampling.MaxTokens; got != 512-len(eng.lastRequest().Prompt) {
		t.Errorf("completions max_tokens became %d", got)
	}
}

func TestOpenAILongChatTruncated(t *testing.T) {
	_, eng, url := newTestServer(t)
	msgs := `{"role":"system","content":"You are terse."}`
	for i := range 12 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs += fmt.Sprintf(`,{"role":%q,"content":"turn %02d %s"}`, role, i, strings.Repeat("w", 60))
	}
	msgs += `,{"role":"user","content":"last question"}`
	for _, stream := range []bool{false, true} {
		status, hdr, body := post(t, url, "/v1/chat/completions", fmt.Sprintf(`{"model":"stories260K","stream":%v,"messages":[%s]}`, stream, msgs))
		if status != 200 {
			t.Fatalf("stream=%v: %d %s", stream, status, body)
		}
		dropped, err := strconv.Atoi(hdr.Get(headerTruncated))
		if err != nil || dropped < 1 || dropped > 12 {
			t.Fatalf("stream=%v: %s = %q", stream, headerTruncated, hdr.Get(headerTruncated))
		}
		if !strings.Contains(string(body), fmt.Sprintf(`"truncated_messages":%d`, dropped)) {
			t.Errorf("stream=%v: body does not report %d dropped messages: %s", stream, dropped, body)
		}
		prompt := fakeText(eng.lastRequest().Prompt)
		if !strings.HasPrefix(prompt, "<|system|>You are terse.") || !strings.Contains(prompt, "last question") ||
			strings.Contains(prompt, "turn 00") || !strings.Contains(prompt, "turn 11") {
			t.Errorf("stream=%v: prompt after dropping %d: %q", stream, dropped, prompt)
		}
	}
	// A chat that fits says nothing.
	_, hdr, body := post(t, url, "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]}`)
	if hdr.Get(headerTruncated) != "" || strings.Contains(string(body), "truncated_messages") {
		t.Errorf("short chat: header %q body %s", hdr.Get(headerTruncated), body)
	}
}

// fakeText decodes the fake engine's tokens (bytes + 3, after BOS).
func fakeText(tokens []int32) string {
	var b strings.Builder
	for _, t := range tokens {
		if t != fakeBOS {
			b.WriteByte(byte(t - 3))
		}
	}
	return b.String()
}
