package infer

import (
	"errors"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
)

var weatherTool = Tool{
	Name:        "get_weather",
	Description: "Get the weather in a city",
	Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`),
}

var timeTool = Tool{Name: "get_time", Parameters: []byte(`{"type":"object","properties":{"zone":{"type":"string"}}}`)}

// toolChat is a chat with one tool call and its result.
var toolChat = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Weather in Paris?"},
	{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Name: "get_weather", Arguments: []byte(`{"city":"Paris","days":2}`)}}},
	{Role: "tool", Content: "22C", ToolCallID: "call_1", Name: "get_weather"},
}

// parallelChat has two calls in one turn (arguments as a JSON string, as
// OpenAI sends them), two results, an answer and a new question.
var parallelChat = []Message{
	{Role: "user", Content: "Weather and time in Paris?"},
	{Role: "assistant", Content: "Let me check.", ToolCalls: []ToolCall{
		{ID: "call_1", Name: "get_weather", Arguments: []byte(`"{\"city\": \"Paris\"}"`)},
		{ID: "call_2", Name: "get_time", Arguments: []byte(`{"zone":"Europe/Paris"}`)},
	}},
	{Role: "tool", Content: "22C", ToolCallID: "call_1"},
	{Role: "tool", Content: "15:04", ToolCallID: "call_2"},
	{Role: "assistant", Content: "22C and 15:04."},
	{Role: "user", Content: "Thanks!"},
}

func TestRealTemplatesFormat(t *testing.T) {
	for _, rt := range realTemplates {
		t.Run(rt.name, func(t *testing.T) {
			f := NewChatFormat(loadRealTemplate(t, rt.module, rt.path), ChatFormatOptions{Now: fixedClock})
			if f.Family() != rt.family || f.ToolFormat() != rt.tools {
				t.Errorf("family %s, tools %s; want %s, %s (jinja: %v)", f.Family(), f.ToolFormat(), rt.family, rt.tools, f.JinjaError())
			}
			if f.UsesJinja() != (rt.tools != ToolFormatGeneric) || f.UsesJinja() != (f.JinjaError() == nil) {
				t.Errorf("UsesJinja %v, JinjaError %v", f.UsesJinja(), f.JinjaError())
			}
		})
	}
}

// TestGuardKeepsOutput renders real templates guarded and as they are:
// the guard must not change a byte.
func TestGuardKeepsOutput(t *testing.T) {
	chats := map[string]struct {
		msgs  []Message
		tools []Tool
	}{
		"tool call":             {toolChat, []Tool{weatherTool}},
		"history without tools": {toolChat, nil},
		"parallel calls":        {parallelChat, []Tool{weatherTool, timeTool}},
	}
	for _, rt := range realTemplates {
		t.Run(rt.name, func(t *testing.T) {
			src := loadRealTemplate(t, rt.module, rt.path)
			f := NewChatFormat(src, ChatFormatOptions{BOS: "<s>", EOS: "</s>", Now: fixedClock})
			orig, err := jinja.Compile(src)
			if err != nil {
				t.Fatalf("compile as is: %v", err)
			}
			guarded, err := compileGuarded(src)
			if rt.tools != ToolFormatGeneric && err != nil {
				t.Fatalf("guard: %v", err)
			}
			if err != nil {
				t.Logf("refused by the guard (so tools use the generic format): %v", err)
				return
			}
			rendered := 0
			for name, c := range chats {
				want, werr := f.renderJinja(orig, rt.tools, c.msgs, c.tools)
				got, gerr := f.renderJinja(guarded, rt.tools, c.msgs, c.tools)
				if (werr == nil) != (gerr == nil) || got != want {
					t.Errorf("%s: guarded render differs:\n got %q (%v)\nwant %q (%v)", name, got, gerr, want, werr)
				}
				if werr == nil {
					rendered++
				}
			}
			if rt.tools != ToolFormatGeneric && rendered == 0 {
				t.Error("no chat rendered")
			}
		})
	}
}

func TestRenderQwen3Tools(t *testing.T) {
	f := realFormat(t, "qwen3")
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}

	// Two calls in one turn, results grouped in one user turn.
	got, err = f.Render(parallelChat, []Tool{weatherTool, timeTool})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{
		"<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}\n</tool_call><|im_end|>\n",
		"<|im_start|>user\n<tool_response>\n22C\n</tool_response>\n<tool_response>\n15:04\n</tool_response><|im_end|>\n",
		"<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n",
	} {
		if !strings.Contains(got, part) {
			t.Errorf("missing %q in\n%s", part, got)
		}
	}
}

func TestRenderLlama31Tools(t *testing.T) {
	src := loadRealTemplate(t, modOllama, "template/index.json#llama3-instruct-tools")
	f := NewChatFormat(src, ChatFormatOptions{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>", AddBOS: true, Now: fixedClock})
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	// BOS removed (the tokenizer adds it); tools in the first user turn;
	// the call as {"name", "parameters"}; the result as ipython.
	want := "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
		"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got\n%q\nwant prefix\n%q", got, want)
	}
	for _, part := range []string{
		`"name": "get_weather"`,
		"Weather in Paris?<|eot_id|>",
		"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}<|eot_id|>",
		"<|start_header_id|>ipython<|end_header_id|>\n\n\"22C\"<|eot_id|>", // Jinja's strings are iterable: tojson, as in transformers
	} {
		if !strings.Contains(got, part) {
			t.Errorf("missing %q in\n%s", part, got)
		}
	}
	if !strings.HasSuffix(got, "<|start_header_id|>assistant<|end_header_id|>\n\n") {
		t.Errorf("does not end with the assistant header: %q", got)
	}

	// Llama 3.2's template dates the prompt with strftime_now.
	f32 := NewChatFormat(loadRealTemplate(t, modJinja, "testdata/templates/Llama-3.2-1B-Instruct-GGUF.jinja"),
		ChatFormatOptions{BOS: "<|begin_of_text|>", Now: fixedClock}) // AddBOS false: the BOS stays
	got, err = f32.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "<|begin_of_text|><|start_header_id|>system") || !strings.Contains(got, "Today Date: 26 Jul 2024\n") {
		t.Errorf("BOS or date wrong: %q", got[:min(len(got), 200)])
	}
}

func TestRenderMinistralTools(t *testing.T) {
	src := loadRealTemplate(t, modJinja, "testdata/templates/Ministral-3-14B-Instruct-2512-Q4_0.jinja")
	f := NewChatFormat(src, ChatFormatOptions{BOS: "<s>", EOS: "</s>", AddBOS: true})
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	want := "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][AVAILABLE_TOOLS]" +
		`[{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]` +
		"[/AVAILABLE_TOOLS][INST]Weather in Paris?[/INST]" +
		`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}</s>` +
		"[TOOL_RESULTS]22C[/TOOL_RESULTS]"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestRenderQwenXMLTools(t *testing.T) {
	f := realFormat(t, "qwen3.5")
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	part := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
	if !strings.Contains(got, part) {
		t.Errorf("missing %q in\n%s", part, got)
	}
}

// TestTemplateRaiseException: a template's raise_exception is a
// *TemplateError, an ErrBadRequest with the template's message.
func TestTemplateRaiseException(t *testing.T) {
	f := realFormat(t, "llama3.1")
	_, err := f.Render(parallelChat, []Tool{weatherTool, timeTool})
	var te *TemplateError
	if !errors.As(err, &te) || !errors.Is(err, ErrBadRequest) || te.Message != "This model only supports single tool-calls at once!" {
		t.Fatalf("err = %v, want the template's exception", err)
	}
	m := realFormat(t, "ministral3")
	_, err = m.Render([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}, {Role: "tool", Content: "x"}}, nil)
	if !errors.As(err, &te) || !strings.Contains(te.Message, "must alternate") {
		t.Fatalf("err = %v, want the alternation exception", err)
	}
}

// TestPlainChatsKeepFamilyRenderer: without tools, a model with a Jinja
// template renders exactly as its family renderer did.
func TestPlainChatsKeepFamilyRenderer(t *testing.T) {
	plain := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Bye"}}
	for _, rt := range realTemplates {
		t.Run(rt.name, func(t *testing.T) {
			f := NewChatFormat(loadRealTemplate(t, rt.module, rt.path), ChatFormatOptions{Now: fixedClock})
			got, err := f.Render(plain, nil)
			want, werr := f.Family().Render(plain)
			if err != nil || werr != nil || got != want {
				t.Errorf("got %q (%v), want %q (%v)", got, err, want, werr)
			}
		})
	}
}

// TestMistralCallIDs: Mistral v0.3's template demands 9-character
// alphanumeric call IDs; calls and results get the same mapped ID.
func TestMistralCallIDs(t *testing.T) {
	src := `{%- for m in messages %}{%- if m.tool_calls %}{%- for c in m.tool_calls %}` +
		`{%- if c.id|length != 9 %}{{ raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}` +
		`[TOOL_CALLS] [{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments|tojson }}, "id": "{{ c.id }}"}]</s>{%- endfor %}` +
		`{%- elif m.role == "tool" %}[TOOL_RESULTS] {"content": {{ m.content|tojson }}, "call_id": "{{ m.tool_call_id }}"}[/TOOL_RESULTS]` +
		`{%- else %}[INST] {{ m.content }}[/INST]{%- endif %}{%- endfor %}{%- if tools %}[AVAILABLE_TOOLS] {{ tools|tojson }}[/AVAILABLE_TOOLS]{%- endif %}`
	f := NewChatFormat(src, ChatFormatOptions{})
	if f.ToolFormat() != ToolFormatMistral {
		t.Fatalf("format %s (%v)", f.ToolFormat(), f.JinjaError())
	}
	got, err := f.Render(toolChat, []Tool{weatherTool})
	if err != nil {
		t.Fatal(err)
	}
	id := mistralCallID("call_1")
	if len(id) != 9 || mistralCallID("abcDEF123") != "abcDEF123" || mistralCallID("call_1") != id {
		t.Fatalf("mistralCallID: %q", id)
	}
	if !strings.Contains(got, `"id": "`+id+`"`) || !strings.Contains(got, `"call_id": "`+id+`"`) {
		t.Errorf("IDs not mapped alike: %s", got)
	}
}

// TestChatFormatConcurrent renders with one ChatFormat from many
// goroutines (run with -race).
func TestChatFormatConcurrent(t *testing.T) {
	f := realFormat(t, "qwen3")
	want, err := f.Render(parallelChat, []Tool{weatherTool, timeTool})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				got, err := f.Render(parallelChat, []Tool{weatherTool, timeTool})
				if err == nil && got != want {
					err = errors.New("renders differ")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
