package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func openAIClient(url string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(url + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
	}, opts...)...)
}

func TestOpenAIChatCompletion(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You tell stories."),
			openai.UserMessage("Tell me a story."),
		},
		Temperature: openai.Float(0.5),
		TopP:        openai.Float(0.9),
		Seed:        openai.Int(42),
		MaxTokens:   openai.Int(100),
	}
	resp, err := client.Chat.Completions.New(ctx, params, option.WithJSONSet("top_k", 40), option.WithJSONSet("min_p", 0.05),
		option.WithJSONSet("repeat_penalty", 1.1))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != fullReply {
		t.Errorf("content = %q, want %q", got, fullReply)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Object != "chat.completion" || resp.Model != "stories260K" {
		t.Errorf("finish=%q object=%q model=%q", resp.Choices[0].FinishReason, resp.Object, resp.Model)
	}
	prompt, _ := eng.Tokenize("<|system|>You tell stories.\n<|user|>Tell me a story.\n<|assistant|>")
	if resp.Usage.PromptTokens != int64(len(prompt)) || resp.Usage.CompletionTokens != 10 || resp.Usage.TotalTokens != int64(len(prompt))+10 {
		t.Errorf("usage = %+v, prompt is %d tokens", resp.Usage, len(prompt))
	}
	if resp.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("first request cached %d tokens", resp.Usage.PromptTokensDetails.CachedTokens)
	}
	got := eng.lastRequest().Sampling
	want := infer.Sampling{Temperature: 0.5, TopP: 0.9, TopK: 40, MinP: 0.05, RepeatPenalty: 1.1, Seed: 42, MaxTokens: 100}
	if !samplingEqual(got, want) {
		t.Errorf("sampling = %+v, want %+v", got, want)
	}
	var tm timings
	if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["timings"].Raw()), &tm); err != nil {
		t.Fatalf("timings: %v", err)
	}
	if tm.PromptN != len(prompt) || tm.PredictedN != 10 || tm.PredictedMS != 90 || tm.CacheN != 0 || tm.PromptPerSecond <= 0 {
		t.Errorf("timings = %+v", tm)
	}

	// The same conversation, one turn longer, reuses the cached prefix.
	params.Messages = append(params.Messages, openai.AssistantMessage(fullReply), openai.UserMessage("Another."))
	resp, err = client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Usage.PromptTokensDetails.CachedTokens; c < int64(len(prompt))-1 {
		t.Errorf("second turn cached %d tokens, want >= %d", c, len(prompt)-1)
	}
}

func samplingEqual(a, b infer.Sampling) bool {
	near := func(x, y float32) bool { return x-y < 1e-6 && y-x < 1e-6 }
	return near(a.Temperature, b.Temperature) && near(a.TopP, b.TopP) && a.TopK == b.TopK && near(a.MinP, b.MinP) &&
		near(a.RepeatPenalty, b.RepeatPenalty) && a.RepeatLastN == b.RepeatLastN && a.Seed == b.Seed &&
		a.MaxTokens == b.MaxTokens && strings.Join(a.Stop, "\x00") == strings.Join(b.Stop, "\x00")
}

func TestOpenAIChatDefaultsAndAlias(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Stop:     openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{" there", "zzz"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "gpt-4o-mini" || resp.Choices[0].Message.Content != "Once upon a time" {
		t.Errorf("model %q content %q", resp.Model, resp.Choices[0].Message.Content)
	}
	got := eng.lastRequest().Sampling
	want := infer.Sampling{Temperature: -1, Seed: -1, Stop: []string{" there", "zzz"}}
	if !samplingEqual(got, want) {
		t.Errorf("sampling = %+v, want engine defaults %+v", got, want)
	}
}

func TestOpenAIChatStreaming(t *testing.T) {
	_, _, url := newTestServer(t)
	client := openAIClient(url)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "stories260K",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var text strings.Builder
	var chunks, finishes int
	var usage *openai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		chunks++
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				finishes++
			}
		}
		if len(c.Choices) == 0 {
			u := c.Usage
			usage = &u
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != fullReply || acc.Choices[0].Message.Content != fullReply {
		t.Errorf("streamed %q (accumulated %q)", text.String(), acc.Choices[0].Message.Content)
	}
	if finishes != 1 || chunks < 10 {
		t.Errorf("%d chunks, %d finish reasons", chunks, finishes)
	}
	if usage == nil || usage.CompletionTokens != 10 || usage.PromptTokens == 0 {
		t.Errorf("usage chunk = %+v", usage)
	}
}

func TestOpenAIStreamWireFormat(t *testing.T) {
	_, _, url := newTestServer(t)
	status, hdr, body := post(t, url, "/v1/chat/completions",
		`{"model":"stories260K","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":2}`)
	if status != 200 || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", status, hdr.Get("Content-Type"))
	}
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	if last := events[len(events)-1]; last != "data: [DONE]" {
		t.Errorf("last event %q", last)
	}
	var first, fin chatChunk
	mustJSON(t, []byte(strings.TrimPrefix(events[0], "data: ")), &first)
	mustJSON(t, []byte(strings.TrimPrefix(events[len(events)-2], "data: ")), &fin)
	if first.Choices[0].Delta.Role != "assistant" || *first.Choices[0].Delta.Content != "Once" {
		t.Errorf("first chunk %+v", first)
	}
	if fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "length" || fin.Timings == nil || fin.Usage != nil {
		t.Errorf("final chunk %s", events[len(events)-2])
	}
	if len(events) != 4 { // "Once", " upon", finish, [DONE]
		t.Errorf("%d events:\n%s", len(events), body)
	}
}

func TestOpenAICompletions(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	resp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     "stories260K",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon")},
		MaxTokens: openai.Int(3),
		Stop:      openai.CompletionNewParamsStopUnion{OfString: openai.String("zzz")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != "Once upon" || resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 3 {
		t.Errorf("completion %+v", resp)
	}
	if p := eng.lastRequest().Prompt; len(p) != len("Once upon")+1 {
		t.Errorf("prompt tokens %v", p)
	}

	// Token prompt, streamed.
	stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:         "stories260K",
		Prompt:        openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 50, 60, 70}},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var text strings.Builder
	var sawUsage bool
	for stream.Next() {
		c := stream.Current()
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
		if len(c.Choices) == 0 && c.Usage.PromptTokens == 4 {
			sawUsage = true
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != fullReply || !sawUsage {
		t.Errorf("streamed %q, usage seen %v", text.String(), sawUsage)
	}
	if p := eng.lastRequest().Prompt; len(p) != 4 || p[3] != 70 {
		t.Errorf("token prompt became %v", p)
	}
}

func TestOpenAIModels(t *testing.T) {
	_, _, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "stories260K,gpt-4o-mini" {
		t.Errorf("models %v", ids)
	}
	m, err := client.Models.Get(ctx, "stories260K")
	if err != nil || m.ID != "stories260K" || m.OwnedBy != "meshllm" {
		t.Errorf("get: %+v, %v", m, err)
	}
	_, err = client.Models.Get(ctx, "nope")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
}

func TestOpenAIErrorsThroughSDK(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "llama-9000", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "model" {
		t.Errorf("unknown model: %v", err)
	}
	eng.set(func(f *fakeEngine) { f.err = infer.ErrBusy })
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "engine_busy" {
		t.Errorf("busy: %v", err)
	}
	// An error after the stream started surfaces as a stream error.
	eng.set(func(f *fakeEngine) { f.err, f.failAfter = nil, 3 })
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "engine failed") || n == 0 {
		t.Errorf("mid-stream failure after %d chunks: %v", n, err)
	}
}
