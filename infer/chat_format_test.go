package infer

import (
	"errors"
	"strings"
	"testing"
)

// TestFamiliesRenderToolMessages: every family renders tool results and
// assistant tool calls (as text), keeping their content.
func TestFamiliesRenderToolMessages(t *testing.T) {
	for _, tmpl := range ChatTemplates() {
		got, err := tmpl.Render(toolChat)
		if err != nil {
			t.Errorf("%s: %v", tmpl, err)
			continue
		}
		for _, part := range []string{"Weather in Paris?", `{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris","days":2}}]}`, "<tool_response>\n22C\n</tool_response>"} {
			if !strings.Contains(got, part) {
				t.Errorf("%s: %q lost in %q", tmpl, part, got)
			}
		}
	}
	// ChatML renders a run of tool results as Qwen's templates do.
	got, err := TemplateChatML.Render(parallelChat)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nWeather and time in Paris?<|im_end|>\n" +
		"<|im_start|>assistant\nLet me check.\n" + `{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}},{"name":"get_time","arguments":{"zone":"Europe/Paris"}}]}` + "<|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n22C\n</tool_response>\n<tool_response>\n15:04\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n22C and 15:04.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestGenericFormatWithoutTemplate: a model without a chat template (a
// base model such as stories260K) gets the generic format: the plain
// family, the tools described in a system paragraph.
func TestGenericFormatWithoutTemplate(t *testing.T) {
	f := NewChatFormat("", ChatFormatOptions{})
	if f.Family() != TemplatePlain || f.ToolFormat() != ToolFormatGeneric || f.UsesJinja() || !errors.Is(f.JinjaError(), errNoToolTemplate) {
		t.Fatalf("family %s tools %s jinja %v", f.Family(), f.ToolFormat(), f.JinjaError())
	}
	plain := []Message{{Role: "user", Content: " Once upon a time"}}
	if got, err := f.Render(plain, nil); err != nil || got != " Once upon a time" {
		t.Fatalf("plain chat changed: %q, %v", got, err)
	}
	got, err := f.Render([]Message{{Role: "user", Content: "Weather in Paris?"}}, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	want := GenericToolPrompt([]Tool{weatherTool}) + "\n\nWeather in Paris?"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, part := range []string{
		`{"name":"get_weather","description":"Get the weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}`,
		`{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments>}}]}`,
		`{"response": "<your answer>"}`,
	} {
		if !strings.Contains(got, part) {
			t.Errorf("generic prompt lacks %q", part)
		}
	}
	// A system message keeps its text first; a tool without parameters
	// is offered as taking any object.
	got, err = f.Render(toolChat, []Tool{{Name: "ping"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "Be brief.\n\nYou can call these tools") || !strings.Contains(got, `{"name":"ping","parameters":{"type":"object"}}`) {
		t.Fatalf("got %q", got)
	}
}

// TestGenericFormatWithChatML: a ChatML model whose template has no tools
// renders tools generically, in ChatML.
func TestGenericFormatWithChatML(t *testing.T) {
	f := NewChatFormat("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", ChatFormatOptions{})
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	if f.ToolFormat() != ToolFormatGeneric || !strings.HasPrefix(got, "<|im_start|>system\nBe brief.\n\nYou can call these tools") ||
		!strings.HasSuffix(got, "<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n<|im_start|>assistant\n") {
		t.Fatalf("format %s, got %q", f.ToolFormat(), got)
	}
}

func TestRenderRejectsBadToolRequests(t *testing.T) {
	user := []Message{{Role: "user", Content: "hi"}}
	many := make([]Tool, MaxTools+1)
	for i := range many {
		many[i] = Tool{Name: "t" + strings.Repeat("x", i%10) + string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	for name, c := range map[string]struct {
		msgs  []Message
		tools []Tool
	}{
		"too many tools":      {user, many},
		"empty tool name":     {user, []Tool{{Name: ""}}},
		"long tool name":      {user, []Tool{{Name: strings.Repeat("a", MaxToolNameBytes+1)}}},
		"bad tool name":       {user, []Tool{{Name: "get weather"}}},
		"duplicate tools":     {user, []Tool{{Name: "a"}, {Name: "a"}}},
		"parameters array":    {user, []Tool{{Name: "a", Parameters: []byte(`[1]`)}}},
		"parameters invalid":  {user, []Tool{{Name: "a", Parameters: []byte(`{"type":`)}}},
		"parameters too deep": {user, []Tool{{Name: "a", Parameters: []byte(strings.Repeat(`{"a":`, maxJSONDepth+2) + "1" + strings.Repeat("}", maxJSONDepth+2))}}},
		"parameters too big":  {user, []Tool{{Name: "a", Parameters: []byte(`{"d":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`)}}},
		"calls on user":       {[]Message{{Role: "user", ToolCalls: []ToolCall{{Name: "a", Arguments: []byte(`{}`)}}}}, nil},
		"call without name":   {[]Message{{Role: "assistant", ToolCalls: []ToolCall{{Arguments: []byte(`{}`)}}}}, nil},
		"arguments array":     {[]Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "a", Arguments: []byte(`[1]`)}}}}, nil},
		"arguments bad json":  {[]Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "a", Arguments: []byte(`"{\"a\":"`)}}}}, nil},
		"unknown role":        {[]Message{{Role: "wizard", Content: "x"}, {Role: "tool", Content: "y"}}, nil},
	} {
		for _, f := range []*ChatFormat{NewChatFormat("", ChatFormatOptions{}), realFormatOrNil(t, "qwen3")} {
			if f == nil {
				continue
			}
			if _, err := f.Render(c.msgs, c.tools); !errors.Is(err, ErrBadRequest) {
				t.Errorf("%s (%s): err = %v, want ErrBadRequest", name, f.ToolFormat(), err)
			}
		}
	}
	// Arguments may come as an object, as a string holding one, or empty.
	for _, args := range []string{`{"a":1}`, `"{\"a\":1}"`, ``, `null`, `""`} {
		msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []ToolCall{{Name: "a", Arguments: []byte(args)}}}}
		if _, err := TemplateChatML.Render(msgs); err != nil {
			t.Errorf("arguments %q: %v", args, err)
		}
	}
}

func realFormatOrNil(t *testing.T, name string) *ChatFormat {
	dir := moduleDir(t, modJinja)
	if dir == "" {
		return nil
	}
	return realFormat(t, name)
}
