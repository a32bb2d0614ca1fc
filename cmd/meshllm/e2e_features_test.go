package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// These tests drive what chat apps send beyond plain chat — structured
// outputs, tools, logprobs, embeddings, long chats — through the real HTTP
// API into the real engine on stories260K, with the real OpenAI and Ollama
// Go clients. stories260K is a tiny story model with no chat template: the
// grammar is what makes its replies valid, which is the point.

// verdictSchema is small and closed, so even stories260K finishes it.
const verdictSchema = `{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":9}},"required":["ok","n"],"additionalProperties":false}`

// weatherTool's arguments are an enum: the tiny model cannot write an
// endless string into them.
const weatherParams = `{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}`

func mustSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// satisfies checks that text is one JSON value valid under s.
func satisfies(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("reply %q is not JSON: %v", text, err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("reply %q breaks the schema: %v", text, err)
	}
}

func openaiAt(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func TestOpenAIStructuredOutput(t *testing.T) {
	base, eng := startServer(t)
	c := openaiAt(base)
	var schema map[string]any
	json.Unmarshal([]byte(verdictSchema), &schema)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    eng.Info().Name,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "verdict", Schema: schema, Strict: openai.Bool(true)},
		}},
		MaxTokens: openai.Int(64), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	satisfies(t, mustSchema(t, verdictSchema), resp.Choices[0].Message.Content)
	if resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("finish_reason %q", resp.Choices[0].FinishReason)
	}
}

func weatherTool(t *testing.T) openai.ChatCompletionToolUnionParam {
	var params map[string]any
	if err := json.Unmarshal([]byte(weatherParams), &params); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("the weather in a city"), Parameters: params,
	})
}

// checkWeatherCall asserts one call of get_weather with arguments valid
// under its schema.
func checkWeatherCall(t *testing.T, calls []openai.ChatCompletionMessageToolCallUnion) {
	t.Helper()
	if len(calls) == 0 {
		t.Fatal("no tool call")
	}
	for _, call := range calls {
		if call.Function.Name != "get_weather" || call.ID == "" {
			t.Fatalf("tool call %+v", call)
		}
		satisfies(t, mustSchema(t, weatherParams), call.Function.Arguments)
	}
}

func TestOpenAIToolCalls(t *testing.T) {
	base, eng := startServer(t)
	c := openaiAt(base)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:      eng.Info().Name,
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		Tools:      []openai.ChatCompletionToolUnionParam{weatherTool(t)},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		MaxTokens:  openai.Int(96), Temperature: openai.Float(0),
	}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("finish_reason %q, message %+v", resp.Choices[0].FinishReason, resp.Choices[0].Message)
	}
	checkWeatherCall(t, resp.Choices[0].Message.ToolCalls)

	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("streamed finish_reason %q", acc.Choices[0].FinishReason)
	}
	checkWeatherCall(t, acc.Choices[0].Message.ToolCalls)
	if got, want := acc.Choices[0].Message.ToolCalls[0].Function.Arguments, resp.Choices[0].Message.ToolCalls[0].Function.Arguments; got != want {
		t.Fatalf("streamed arguments %q, non-streamed %q", got, want)
	}

	// The result goes back as a tool message; the model answers in text.
	call := resp.Choices[0].Message.ToolCalls[0]
	params.Messages = append(params.Messages, resp.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temp_c": 21}`, call.ID))
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	params.MaxTokens = openai.Int(16)
	again, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Choices[0].Message.ToolCalls) != 0 || again.Choices[0].Message.Content == "" {
		t.Fatalf("after the tool result, with tool_choice none: %+v", again.Choices[0].Message)
	}
}

func TestOpenAILogprobs(t *testing.T) {
	base, eng := startServer(t)
	c := openaiAt(base)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    eng.Info().Name,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
		MaxTokens: openai.Int(12), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	lp := resp.Choices[0].Logprobs.Content
	if len(lp) == 0 || int64(len(lp)) > resp.Usage.CompletionTokens {
		t.Fatalf("%d logprobs for %d tokens", len(lp), resp.Usage.CompletionTokens)
	}
	var text strings.Builder
	for _, l := range lp {
		if l.Logprob > 0 || len(l.TopLogprobs) != 3 {
			t.Fatalf("logprob %+v", l)
		}
		// Greedy: the chosen token is the most likely one.
		if l.TopLogprobs[0].Token != l.Token || l.TopLogprobs[0].Logprob != l.Logprob {
			t.Fatalf("greedy token %q (%g) is not the top alternative %+v", l.Token, l.Logprob, l.TopLogprobs[0])
		}
		text.WriteString(l.Token)
	}
	if !strings.HasPrefix(text.String(), resp.Choices[0].Message.Content) {
		t.Fatalf("tokens %q do not spell the reply %q", text.String(), resp.Choices[0].Message.Content)
	}
}

func TestOpenAIEmbeddings(t *testing.T) {
	base, eng := startServer(t)
	c := openaiAt(base)
	ctx := context.Background()
	resp, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: openai.EmbeddingModel(eng.Info().Name),
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the cat sat", "a dog ran far away"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || len(resp.Data[0].Embedding) != eng.Info().EmbeddingLength || resp.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings: %d vectors of %d (want %d), usage %+v", len(resp.Data), len(resp.Data[0].Embedding), eng.Info().EmbeddingLength, resp.Usage)
	}
	norm := 0.0
	for _, x := range resp.Data[0].Embedding {
		norm += x * x
	}
	if math.Abs(norm-1) > 1e-3 {
		t.Fatalf("|v|^2 = %g, want 1", norm)
	}
	// base64: the same vector as little-endian float32s.
	body := `{"model":"` + eng.Info().Name + `","input":"the cat sat","encoding_format":"base64"}`
	r, err := http.Post(base+"/v1/embeddings", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b64); err != nil || len(b64.Data) != 1 {
		t.Fatalf("base64 answer: %v %+v", err, b64)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*len(resp.Data[0].Embedding) {
		t.Fatalf("base64 vector: %v, %d bytes", err, len(raw))
	}
	for i := range resp.Data[0].Embedding {
		f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if math.Abs(float64(f)-resp.Data[0].Embedding[i]) > 1e-4 {
			t.Fatalf("base64 component %d = %g, float answer %g", i, f, resp.Data[0].Embedding[i])
		}
	}
}

func ollamaAt(t *testing.T, base string) *ollama.Client {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return ollama.NewClient(u, http.DefaultClient)
}

func TestOllamaToolsFormatEmbed(t *testing.T) {
	base, eng := startServer(t)
	c := ollamaAt(t, base)
	ctx := context.Background()
	model := eng.Info().Name
	no := false

	// format: a JSON schema.
	var chat ollama.ChatResponse
	err := c.Chat(ctx, &ollama.ChatRequest{
		Model: model, Stream: &no, Format: json.RawMessage(verdictSchema),
		Messages: []ollama.Message{{Role: "user", Content: "Once upon a time"}},
		Options:  map[string]any{"temperature": 0, "num_predict": 64},
	}, func(r ollama.ChatResponse) error { chat = r; return nil })
	if err != nil {
		t.Fatal(err)
	}
	satisfies(t, mustSchema(t, verdictSchema), chat.Message.Content)

	// tools: with a tool list and a question, the generic tool format's
	// grammar lets the model call it or answer; either is valid JSON-free
	// output to the client, and a call names the tool.
	var tool ollama.Tool
	if err := json.Unmarshal([]byte(`{"type":"function","function":{"name":"get_weather","description":"the weather in a city","parameters":`+weatherParams+`}}`), &tool); err != nil {
		t.Fatal(err)
	}
	var content strings.Builder
	var calls []ollama.ToolCall
	yes := true
	err = c.Chat(ctx, &ollama.ChatRequest{
		Model: model, Stream: &yes, Tools: ollama.Tools{tool},
		Messages: []ollama.Message{{Role: "user", Content: "What is the weather in Paris?"}},
		Options:  map[string]any{"temperature": 0, "num_predict": 96},
	}, func(r ollama.ChatResponse) error {
		content.WriteString(r.Message.Content)
		calls = append(calls, r.Message.ToolCalls...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range calls {
		if call.Function.Name != "get_weather" {
			t.Fatalf("tool call %+v", call)
		}
		args, _ := json.Marshal(call.Function.Arguments)
		satisfies(t, mustSchema(t, weatherParams), string(args))
	}
	if len(calls) == 0 && strings.Contains(content.String(), `"tool_calls"`) {
		t.Fatalf("the tool format leaked into the content: %q", content.String())
	}

	// embed.
	emb, err := c.Embed(ctx, &ollama.EmbedRequest{Model: model, Input: []string{"the cat sat", "the cat sat"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Embeddings) != 2 || len(emb.Embeddings[0]) != eng.Info().EmbeddingLength {
		t.Fatalf("embed: %d vectors", len(emb.Embeddings))
	}
	for i := range emb.Embeddings[0] {
		if emb.Embeddings[0][i] != emb.Embeddings[1][i] {
			t.Fatal("the same text embedded twice differs")
		}
	}
}

// TestOllamaLongChat: a chat longer than the served context drops its
// oldest turns and is answered, keeping the last message.
func TestOllamaLongChat(t *testing.T) {
	base, eng := startServer(t)
	c := ollamaAt(t, base)
	ctxLen := eng.Info().ContextLength
	turn := strings.Repeat("Lily went to the park and saw a big red ball. ", 8)
	var msgs []ollama.Message
	msgs = append(msgs, ollama.Message{Role: "system", Content: "You tell short stories."})
	for len(msgs)*120 < 3*ctxLen {
		msgs = append(msgs, ollama.Message{Role: "user", Content: turn}, ollama.Message{Role: "assistant", Content: "Then she went home."})
	}
	msgs = append(msgs, ollama.Message{Role: "user", Content: "Tell me about Tom."})
	no := false
	var last ollama.ChatResponse
	err := c.Chat(context.Background(), &ollama.ChatRequest{
		Model: eng.Info().Name, Stream: &no, Messages: msgs,
		Options: map[string]any{"temperature": 0, "num_predict": 8},
	}, func(r ollama.ChatResponse) error { last = r; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !last.Done || last.PromptEvalCount >= ctxLen || last.PromptEvalCount == 0 {
		t.Fatalf("long chat: done=%v, %d prompt tokens in a %d context", last.Done, last.PromptEvalCount, ctxLen)
	}
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}
