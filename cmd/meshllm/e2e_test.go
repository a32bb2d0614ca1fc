package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/llama"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/meshllm/meshllm/testnet/mmlu"
	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// These tests run the real engine on stories260K behind the real HTTP API,
// driven by the real Ollama and OpenAI Go clients.

var storiesPath = filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		// Multi-process tests re-run this binary as the meshllm command.
		main()
		os.Exit(0)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

// peer starts a real engine and HTTP server and returns the server's URL.
func startServer(t *testing.T) (string, *llama.Engine) {
	t.Helper()
	cfg := llama.DefaultConfig(storiesPath)
	cfg.Threads = 1 // never oversubscribe the CPU: ggml threads spin-wait
	eng, err := llama.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv, err := httpapi.NewServer(httpapi.DefaultConfig(), eng)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, eng
}

func TestOllamaClient(t *testing.T) {
	base, eng := startServer(t)
	u, _ := url.Parse(base)
	c := ollama.NewClient(u, http.DefaultClient)
	ctx := context.Background()
	model := eng.Info().Name

	for _, stream := range []bool{true, false} {
		var text strings.Builder
		var last ollama.GenerateResponse
		chunks := 0
		err := c.Generate(ctx, &ollama.GenerateRequest{
			Model: model, Prompt: "Once upon a time", Raw: true, Stream: &stream,
			Options: map[string]any{"temperature": 0, "num_predict": 24, "seed": 7},
		}, func(r ollama.GenerateResponse) error {
			chunks++
			text.WriteString(r.Response)
			last = r
			return nil
		})
		if err != nil {
			t.Fatalf("generate stream=%v: %v", stream, err)
		}
		if !last.Done || last.EvalCount == 0 || last.PromptEvalCount == 0 || last.PromptEvalDuration <= 0 || strings.TrimSpace(text.String()) == "" {
			t.Fatalf("generate stream=%v: final %+v text %q", stream, last.Metrics, text.String())
		}
		if stream && chunks < 3 || !stream && chunks != 1 {
			t.Fatalf("generate stream=%v: %d chunks", stream, chunks)
		}
	}

	var reply strings.Builder
	var final ollama.ChatResponse
	err := c.Chat(ctx, &ollama.ChatRequest{
		Model:    model,
		Messages: []ollama.Message{{Role: "user", Content: "Tell me about a cat"}},
		Options:  map[string]any{"temperature": 0, "num_predict": 16},
	}, func(r ollama.ChatResponse) error {
		reply.WriteString(r.Message.Content)
		final = r
		return nil
	})
	if err != nil || !final.Done || reply.Len() == 0 {
		t.Fatalf("chat: err %v, final %+v, reply %q", err, final, reply.String())
	}

	list, err := c.List(ctx)
	if err != nil || len(list.Models) == 0 || list.Models[0].Name == "" {
		t.Fatalf("list: %v %+v", err, list)
	}
	if err := c.Generate(ctx, &ollama.GenerateRequest{Model: "no-such-model", Prompt: "x"}, func(ollama.GenerateResponse) error { return nil }); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown model: err = %v", err)
	}
}

func TestOpenAIClient(t *testing.T) {
	base, eng := startServer(t)
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	model := eng.Info().Name
	params := openai.ChatCompletionNewParams{
		Model:       model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens:   openai.Int(24),
		Temperature: openai.Float(0),
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens == 0 {
		t.Fatalf("chat: %+v", resp)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || acc.Choices[0].Message.Content != resp.Choices[0].Message.Content {
		t.Fatalf("stream: %d chunks, %q vs non-streamed %q", chunks, acc.Choices[0].Message.Content, resp.Choices[0].Message.Content)
	}
	// The same prompt again: served from the cache.
	if acc.Usage.PromptTokensDetails.CachedTokens < acc.Usage.PromptTokens-1 {
		t.Fatalf("repeat prompt: usage %+v", acc.Usage)
	}

	comp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(model),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("The little dog")},
		MaxTokens: openai.Int(12),
	})
	if err != nil || len(comp.Choices) != 1 || comp.Choices[0].Text == "" {
		t.Fatalf("completion: %v %+v", err, comp)
	}
	models, err := c.Models.List(ctx)
	if err != nil || len(models.Data) == 0 || models.Data[0].ID != model {
		t.Fatalf("models: %v %+v", err, models)
	}
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "nope", Messages: params.Messages}); err == nil {
		t.Fatal("unknown model accepted")
	}
}

// TestMMLUPrefixCached sends two 5-shot prompts of one MMLU subject: the
// second must report at least the shared prefix, less one block, as cached.
func TestMMLUPrefixCached(t *testing.T) {
	base, eng := startServer(t)
	set, err := mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
	if err != nil {
		t.Fatal(err)
	}
	sub := set.Subject("high_school_geography")
	prefix, err := eng.Tokenize(sub.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	var usage [2]openai.CompletionUsage
	for i := range 2 {
		r, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
			Model:       openai.CompletionNewParamsModel(eng.Info().Name),
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(sub.FiveShot(i))},
			MaxTokens:   openai.Int(2),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		usage[i] = r.Usage
	}
	shared := int64(len(prefix)) - 1 // the prefix's last token may merge with what follows
	if got := usage[1].PromptTokensDetails.CachedTokens; got < shared-int64(blockTokens) {
		t.Fatalf("second prompt cached %d tokens; shared prefix is %d tokens", got, shared)
	}
	if usage[0].PromptTokensDetails.CachedTokens > 1 {
		t.Fatalf("first prompt reported %d cached tokens on a fresh peer", usage[0].PromptTokensDetails.CachedTokens)
	}
	t.Logf("prefix %d tokens; first %+v; second cached %d of %d", len(prefix), usage[0].PromptTokensDetails, usage[1].PromptTokensDetails.CachedTokens, usage[1].PromptTokens)
}

// blockTokens is the digest block size the mesh advertises at; the local
// cache is exact, so a prompt must reuse at least all but one block.
const blockTokens = 16

var _ = infer.ErrBusy
