package httpapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// weatherParams is the get_weather tool's parameter schema.
var weatherParams = shared.FunctionParameters{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}},
	"required":   []string{"city"},
}

func openAITools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Description: openai.String("Get the weather"), Parameters: weatherParams}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time"}),
	}
}

// toolHistory is a chat with an earlier call and its answer.
func toolHistory() []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("Weather in Oslo?"),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
		}}}},
		openai.ToolMessage("sunny", "call_1"),
		openai.UserMessage("And Paris, and the time?"),
	}
}

// twoCalls is the fake's reply: content, then two Hermes tool calls.
func twoCalls() []string {
	return hermesCalls("Let me check.", "get_weather", `{"city": "Paris"}`, "get_time", `{}`)
}

func TestOpenAIChatToolCalls(t *testing.T) {
	_, eng, url := newTestServer(t)
	eng.set(func(f *fakeEngine) { f.reply = twoCalls() })
	client := openAIClient(url)
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: toolHistory(), Tools: openAITools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "Let me check." || ch.Message.JSON.Refusal.Raw() != "null" {
		t.Errorf("finish %q content %q refusal %s", ch.FinishReason, ch.Message.Content, ch.Message.JSON.Refusal.Raw())
	}
	calls := ch.Message.ToolCalls
	if len(calls) != 2 {
		t.Fatalf("calls %+v", calls)
	}
	for i, want := range []struct{ name, args string }{{"get_weather", `{"city":"Paris"}`}, {"get_time", `{}`}} {
		c := calls[i]
		if c.Type != "function" || !strings.HasPrefix(c.ID, "call_") || c.Function.Name != want.name || compactJSON(t, c.Function.Arguments) != want.args {
			t.Errorf("call %d = %+v, want %s(%s)", i, c, want.name, want.args)
		}
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("calls share ID %q", calls[0].ID)
	}
	if !strings.HasPrefix(resp.SystemFingerprint, "fp_") {
		t.Errorf("system_fingerprint %q", resp.SystemFingerprint)
	}

	// The engine rendered the tools and the history's call and answer.
	eng.mu.Lock()
	tools, msgs := eng.renderedTools, eng.renderedMsgs
	eng.mu.Unlock()
	if len(tools) != 2 || tools[0].Name != "get_weather" || tools[0].Description != "Get the weather" ||
		compactJSON(t, string(tools[0].Parameters)) != `{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}` {
		t.Errorf("rendered tools %+v", tools)
	}
	if len(msgs) != 4 || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != "call_1" ||
		string(msgs[1].ToolCalls[0].Arguments) != `{"city":"Oslo"}` || msgs[1].Content != "" {
		t.Fatalf("rendered messages %+v", msgs)
	}
	if m := msgs[2]; m.Role != "tool" || m.ToolCallID != "call_1" || m.Name != "get_weather" || m.Content != "sunny" {
		t.Errorf("tool message %+v", m)
	}
	if c := eng.lastRequest().Sampling.Constraint; c != nil {
		t.Errorf("tool_choice auto in the Hermes format needs no constraint, got %+v", c)
	}
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestOpenAIChatToolCallsStreamed(t *testing.T) {
	_, eng, url := newTestServer(t)
	eng.set(func(f *fakeEngine) { f.reply = twoCalls() })
	client := openAIClient(url)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: toolHistory(), Tools: openAITools(),
	})
	var acc openai.ChatCompletionAccumulator
	var content strings.Builder
	var order []string // "c" content chunk, "n" call name chunk, "a" arguments chunk, "f" finish
	fingerprints := map[string]bool{}
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		fingerprints[c.SystemFingerprint] = true
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Content != "" {
				content.WriteString(d.Content)
				order = append(order, "c")
			}
			for _, tc := range d.ToolCalls {
				switch {
				case tc.Function.Name != "" && tc.ID != "" && tc.Type == "function" && tc.Function.Arguments == "":
					order = append(order, "n")
				case tc.Function.Name == "" && tc.ID == "" && tc.Function.Arguments != "":
					order = append(order, "a")
				default:
					t.Errorf("tool call delta %s", tc.RawJSON())
				}
			}
			if ch.FinishReason != "" {
				order = append(order, "f:"+ch.FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != "Let me check." {
		t.Errorf("streamed content %q", content.String())
	}
	got := strings.Join(order, " ")
	if !strings.HasPrefix(got, "c") || !strings.HasSuffix(got, "n a n a f:tool_calls") {
		t.Errorf("chunk order %q: content first, then name and arguments of each call, then the finish", got)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].Function.Name != "get_weather" || compactJSON(t, calls[0].Function.Arguments) != `{"city":"Paris"}` ||
		calls[1].Function.Name != "get_time" || !strings.HasPrefix(calls[1].ID, "call_") {
		t.Errorf("accumulated calls %+v", calls)
	}
	if len(fingerprints) != 1 || fingerprints[""] {
		t.Errorf("fingerprints %v", fingerprints)
	}
}

func TestOpenAIToolChoice(t *testing.T) {
	_, eng, url := newTestServer(t)
	eng.set(func(f *fakeEngine) { f.reply = twoCalls() })
	client := openAIClient(url)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "stories260K", Messages: toolHistory(), Tools: openAITools()}

	// required: the engine is made to write a call (a Hermes block of one
	// of the tools); parallel_tool_calls false keeps the first call.
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	params.ParallelToolCalls = openai.Bool(false)
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := eng.lastRequest().Sampling.Constraint
	if c == nil || c.Prefix != "<tool_call>\n" || !strings.Contains(c.JSONSchema, `"get_weather"`) || !strings.Contains(c.JSONSchema, `"get_time"`) {
		t.Errorf("required: constraint %+v", c)
	}
	if n := len(resp.Choices[0].Message.ToolCalls); n != 1 || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("parallel_tool_calls false: %d calls, finish %q", n, resp.Choices[0].FinishReason)
	}

	// A named function: only its schema.
	params.ParallelToolCalls = openai.Bool(true)
	params.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"})
	if _, err := client.Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	c = eng.lastRequest().Sampling.Constraint
	if c == nil || !strings.Contains(c.JSONSchema, `"get_time"`) || strings.Contains(c.JSONSchema, `"get_weather"`) {
		t.Errorf("named: constraint %+v", c)
	}

	// none: no tools offered, nothing parsed: the reply is content.
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	resp, err = client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	eng.mu.Lock()
	rendered := eng.renderedTools
	eng.mu.Unlock()
	if rendered != nil || eng.lastRequest().Sampling.Constraint != nil || len(resp.Choices[0].Message.ToolCalls) != 0 ||
		!strings.Contains(resp.Choices[0].Message.Content, "<tool_call>") || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("none: tools %v, reply %+v", rendered, resp.Choices[0])
	}
}
