package llama

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
)

// TestToolCallGenericRequired: stories260K has no chat template, so it
// gets the generic tool format; with tool_choice "required" the engine's
// grammar makes even this model answer with a tool call that parses. It
// needs Sampling.Constraint honoured, and fails (does not skip) when
// Generate ignores a constraint.
func TestToolCallGenericRequired(t *testing.T) {
	e := load(t, func(c *Config) { c.ContextLength = 1024 })
	info := e.Info()
	if info.ToolFormat != string(infer.ToolFormatGeneric) || info.Template != string(infer.TemplatePlain) {
		t.Fatalf("tool format %q, template %q; want generic, plain", info.ToolFormat, info.Template)
	}
	if e.ChatFormat().UsesJinja() || e.ChatFormat().JinjaError() == nil {
		t.Fatal("a model without a template renders tools with Jinja?")
	}

	// First: is Sampling.Constraint honoured at all?
	probe, _ := gen(t, e, "Once upon a time", infer.Sampling{Temperature: 0, MaxTokens: 48, Seed: 1,
		Constraint: &infer.Constraint{JSONSchema: `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`}})
	var ok struct{ OK *bool }
	if json.Unmarshal([]byte(probe), &ok) != nil || ok.OK == nil {
		t.Fatalf("Generate ignored Sampling.Constraint (reply %q is not the constrained JSON): tool_choice required cannot work", probe)
	}

	tools := []infer.Tool{
		{Name: "get_weather", Description: "Get the weather", Parameters: json.RawMessage(`{"type":"object","properties":{"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["unit"]}`)},
		{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"utc":{"type":"boolean"}},"required":["utc"]}`)},
	}
	messages := []infer.Message{{Role: "user", Content: "What is the weather like?"}}
	prompt, err := e.Render(messages, tools)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, infer.GenericToolPrompt(tools)) || !strings.HasSuffix(prompt, "What is the weather like?") {
		t.Fatalf("prompt %q", prompt)
	}
	format := infer.ToolFormat(info.ToolFormat)
	// Single: the tiny model would repeat calls until max_tokens otherwise.
	for _, choice := range []infer.ToolChoice{{Mode: infer.ToolChoiceRequired, Single: true}, {Function: "get_time", Single: true}} {
		c, err := format.Constraint(tools, choice)
		if err != nil || c == nil {
			t.Fatalf("%+v: constraint %v, %v", choice, c, err)
		}
		text, res := gen(t, e, prompt, infer.Sampling{Temperature: 0, MaxTokens: 200, Seed: 1, Constraint: c})
		content, calls := format.Parse(text, tools)
		if len(calls) == 0 || content != "" || res.FinishReason != infer.FinishStop {
			t.Fatalf("%+v: reply %q (%s) gave content %q and %d calls", choice, text, res.FinishReason, content, len(calls))
		}
		for _, call := range calls {
			var args map[string]any
			if err := json.Unmarshal(call.Arguments, &args); err != nil || !strings.HasPrefix(call.ID, "call_") {
				t.Fatalf("%+v: call %+v", choice, call)
			}
			switch {
			case call.Name == "get_weather" && choice.Function == "":
				if u := args["unit"]; u != "celsius" && u != "fahrenheit" {
					t.Fatalf("unit %v", u)
				}
			case call.Name == "get_time":
				if _, ok := args["utc"].(bool); !ok {
					t.Fatalf("utc %v", args["utc"])
				}
			default:
				t.Fatalf("%+v: called %q", choice, call.Name)
			}
		}
		t.Logf("%+v: %q -> %+v", choice, text, calls)
	}

	// "auto" in the generic format: a call, or the text of {"response": ...}
	// (cut by max_tokens here, still shown as text, never as raw JSON).
	auto, err := format.Constraint(tools, infer.ToolChoice{Mode: infer.ToolChoiceAuto, Single: true})
	if err != nil || auto == nil {
		t.Fatalf("auto: %v, %v", auto, err)
	}
	text, _ := gen(t, e, prompt, infer.Sampling{Temperature: 0, MaxTokens: 200, Seed: 1, Constraint: auto})
	content, calls := format.Parse(text, tools)
	if len(calls) == 0 && (content == "" || strings.HasPrefix(strings.TrimSpace(content), "{")) {
		t.Fatalf("auto: reply %q gave content %q and no calls", text, content)
	}
	t.Logf("auto: %q -> %q, %d calls", text, content, len(calls))

	// A streamed reply splits the same way.
	c, _ := format.Constraint(tools, infer.ToolChoice{Mode: infer.ToolChoiceRequired, Single: true})
	toks, err := e.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	stream := format.NewStream(tools)
	var shown strings.Builder
	if _, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: infer.Sampling{Temperature: 0, MaxTokens: 200, Seed: 1, Constraint: c}},
		func(p infer.Piece) error { shown.WriteString(stream.Write(p.Text)); return nil }); err != nil {
		t.Fatal(err)
	}
	rest, calls := stream.Close()
	if shown.String()+rest != "" || len(calls) == 0 {
		t.Fatalf("stream: content %q+%q, %d calls", shown.String(), rest, len(calls))
	}
}
