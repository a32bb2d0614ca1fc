package infer

import (
	"encoding/json"
	"strings"
	"testing"
)

// call is a parsed call without its (random) ID.
type call struct{ name, args string }

func callsOf(cs []ToolCall) []call {
	var out []call
	for _, c := range cs {
		out = append(out, call{c.Name, string(c.Arguments)})
	}
	return out
}

func equalCalls(a, b []call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var parseTools = []Tool{weatherTool, timeTool}

type parseCase struct {
	name    string
	format  ToolFormat
	text    string
	content string
	calls   []call
}

var paris = call{"get_weather", `{"city":"Paris"}`}

var parseCases = []parseCase{
	// Hermes / Qwen.
	{"hermes call", ToolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []call{paris}},
	{"hermes content first", ToolFormatHermes, "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "Let me check.", []call{paris}},
	{"hermes two calls", ToolFormatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"parameters\": \"{\\\"zone\\\": \\\"UTC\\\"}\"}\n</tool_call>", "",
		[]call{paris, {"get_time", `{"zone":"UTC"}`}}},
	{"hermes thinking", ToolFormatHermes, "<think>\nweather\n</think>\n\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>", "<think>\nweather\n</think>", []call{paris}},
	{"hermes text after", ToolFormatHermes, "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>\nDone.", "Done.", []call{paris}},
	{"hermes no arguments", ToolFormatHermes, `<tool_call>{"name":"get_time"}</tool_call>`, "", []call{{"get_time", `{}`}}},
	{"hermes unterminated", ToolFormatHermes, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", nil},
	{"hermes invalid json", ToolFormatHermes, "<tool_call>{name: get_weather}</tool_call> ok", "<tool_call>{name: get_weather}</tool_call> ok", nil},
	{"hermes array arguments", ToolFormatHermes, `<tool_call>{"name":"get_weather","arguments":[1]}</tool_call>`, `<tool_call>{"name":"get_weather","arguments":[1]}</tool_call>`, nil},
	{"hermes bad then good", ToolFormatHermes, "<tool_call>{}</tool_call>\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>", "<tool_call>{}</tool_call>", []call{paris}},
	{"hermes nested marker", ToolFormatHermes, "<tool_call><tool_call>{\"name\":\"a\"}</tool_call>", "<tool_call><tool_call>{\"name\":\"a\"}</tool_call>", nil},
	{"hermes partial marker", ToolFormatHermes, "a <tool_ca", "a <tool_ca", nil},
	{"hermes plain text", ToolFormatHermes, "Hello <b>world</b>\n", "Hello <b>world</b>\n", nil},
	{"hermes empty", ToolFormatHermes, "", "", nil},
	{"hermes xml inside", ToolFormatHermes, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", "", []call{paris}},
	{"hermes hostile name", ToolFormatHermes, `<tool_call>{"name":"a\"b","arguments":{}}</tool_call>`, `<tool_call>{"name":"a\"b","arguments":{}}</tool_call>`, nil},

	// Qwen3-Coder XML.
	{"xml call", ToolFormatQwenXML, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>", "", []call{{"get_weather", `{"city":"Paris","days":2}`}}},
	{"xml typed by schema", ToolFormatQwenXML, "<tool_call><function=get_weather><parameter=city>123</parameter></function></tool_call>", "", []call{{"get_weather", `{"city":"123"}`}}},
	{"xml untyped json", ToolFormatQwenXML, "<tool_call><function=other><parameter=n>[1, 2]</parameter><parameter=s>x y</parameter></function></tool_call>", "", []call{{"other", `{"n":[1,2],"s":"x y"}`}}},
	{"xml multiline value", ToolFormatQwenXML, "<tool_call>\n<function=get_time>\n<parameter=zone>\nline1\nline2\n</parameter>\n</function>\n</tool_call>", "", []call{{"get_time", `{"zone":"line1\nline2"}`}}},
	{"xml unclosed function", ToolFormatQwenXML, "<tool_call><function=get_time><parameter=zone>x</parameter></tool_call>", "<tool_call><function=get_time><parameter=zone>x</parameter></tool_call>", nil},
	{"xml unclosed parameter", ToolFormatQwenXML, "<tool_call><function=get_time><parameter=zone>x</function></tool_call>", "<tool_call><function=get_time><parameter=zone>x</function></tool_call>", nil},

	// GLM.
	{"glm call", ToolFormatGLM, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>", "", []call{{"get_weather", `{"city":"Paris","days":2}`}}},
	{"glm no arguments", ToolFormatGLM, "<tool_call>get_time\n</tool_call>", "", []call{{"get_time", `{}`}}},
	{"glm missing value", ToolFormatGLM, "<tool_call>get_time<arg_key>zone</arg_key></tool_call>", "<tool_call>get_time<arg_key>zone</arg_key></tool_call>", nil},

	// Llama 3.x JSON.
	{"llama3 call", ToolFormatLlama3, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []call{paris}},
	{"llama3 python tag", ToolFormatLlama3, `<|python_tag|>{"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}}`, "", []call{paris}},
	{"llama3 two calls", ToolFormatLlama3, "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {}}", "", []call{paris, {"get_time", `{}`}}},
	{"llama3 json answer", ToolFormatLlama3, `{"name": "Bob", "age": 3}`, `{"name": "Bob", "age": 3}`, nil},
	{"llama3 unknown tool", ToolFormatLlama3, `{"name": "rm_rf", "parameters": {}}`, `{"name": "rm_rf", "parameters": {}}`, nil},
	{"llama3 prose", ToolFormatLlama3, `Sure: {"name": "get_weather", "parameters": {}}`, `Sure: {"name": "get_weather", "parameters": {}}`, nil},
	{"llama3 truncated", ToolFormatLlama3, `{"name": "get_weather", "parameters": {"ci`, `{"name": "get_weather", "parameters": {"ci`, nil},
	{"llama3 trailing prose", ToolFormatLlama3, `{"name": "get_weather", "parameters": {"city": "Paris"}} and more`, `{"name": "get_weather", "parameters": {"city": "Paris"}} and more`, nil},
	{"llama3 partial tag", ToolFormatLlama3, `<|python_ta`, `<|python_ta`, nil},

	// Mistral.
	{"mistral call", ToolFormatMistral, `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]`, "", []call{paris}},
	{"mistral two", ToolFormatMistral, `Sure.[TOOL_CALLS][{"name":"get_weather","arguments":{"city":"Paris"},"id":"abcdefghi"},{"name":"get_time","arguments":"{}"}]`, "Sure.", []call{paris, {"get_time", `{}`}}},
	{"mistral object", ToolFormatMistral, `[TOOL_CALLS]{"name": "get_time", "arguments": {}}`, "", []call{{"get_time", `{}`}}},
	{"mistral not json", ToolFormatMistral, `[TOOL_CALLS] get_weather(city="Paris")`, `[TOOL_CALLS] get_weather(city="Paris")`, nil},
	{"mistral trailing text", ToolFormatMistral, `[TOOL_CALLS][{"name":"get_time","arguments":{}}] ok`, `[TOOL_CALLS][{"name":"get_time","arguments":{}}] ok`, nil},

	// Mistral [ARGS].
	{"mistral-args call", ToolFormatMistralArgs, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, "", []call{paris}},
	{"mistral-args two", ToolFormatMistralArgs, `[TOOL_CALLS]get_time[ARGS]{}[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city":"Paris"}`, "", []call{{"get_time", `{}`}, paris}},
	{"mistral-args no args", ToolFormatMistralArgs, `Hm.[TOOL_CALLS]get_time`, `Hm.[TOOL_CALLS]get_time`, nil},
	{"mistral-args string args", ToolFormatMistralArgs, `[TOOL_CALLS]get_weather[ARGS]"{\"city\":\"Paris\"}"`, "", []call{paris}},

	// Generic.
	{"generic call", ToolFormatGeneric, `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}`, "", []call{paris}},
	{"generic one call", ToolFormatGeneric, ` {"tool_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}`, "", []call{paris}},
	{"generic response", ToolFormatGeneric, `{"response": "Hello \"world\"\n\u00e9\ud83d\ude00\/"}`, "Hello \"world\"\né😀/", nil},
	{"generic response spaced", ToolFormatGeneric, "{\n  \"response\" :\n \"hi\"\n}", "hi", nil},
	{"generic unterminated", ToolFormatGeneric, `{"response": "Once upon`, "Once upon", nil},
	{"generic bad escapes", ToolFormatGeneric, `{"response": "a\qb\u12x\ud800z\`, `a\qb\u12x` + "\uFFFDz\\", nil},
	{"generic prose", ToolFormatGeneric, "Once upon a time {", "Once upon a time {", nil},
	{"generic other json", ToolFormatGeneric, `{"foo": 1}`, `{"foo": 1}`, nil},
	{"generic invalid", ToolFormatGeneric, `{"tool_calls": [{"name": "x", "arguments": {]}`, `{"tool_calls": [{"name": "x", "arguments": {]}`, nil},
	{"generic empty calls", ToolFormatGeneric, `{"tool_calls": []}`, `{"tool_calls": []}`, nil},
	{"generic calls and response", ToolFormatGeneric, `{"tool_calls": [{"name": "get_time"}], "response": "checking"}`, "checking", []call{{"get_time", `{}`}}},

	// Formats without tool calls.
	{"unknown format", ToolFormat("future"), `<tool_call>{"name":"a"}</tool_call>`, `<tool_call>{"name":"a"}</tool_call>`, nil},
	{"no format", "", `[TOOL_CALLS]a[ARGS]{}`, `[TOOL_CALLS]a[ARGS]{}`, nil},
}

func TestParseToolCalls(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			content, calls := c.format.Parse(c.text, parseTools)
			if content != c.content || !equalCalls(callsOf(calls), c.calls) {
				t.Errorf("Parse(%q):\n got %q %v\nwant %q %v", c.text, content, callsOf(calls), c.content, c.calls)
			}
			checkCalls(t, calls)
		})
	}
}

// checkCalls: IDs are fresh and unique; arguments are JSON objects.
func checkCalls(t *testing.T, calls []ToolCall) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range calls {
		if !strings.HasPrefix(c.ID, "call_") || len(c.ID) < 20 || seen[c.ID] {
			t.Errorf("bad or repeated ID %q", c.ID)
		}
		seen[c.ID] = true
		var obj map[string]any
		if c.Name == "" || json.Unmarshal(c.Arguments, &obj) != nil || obj == nil {
			t.Errorf("call %q: arguments %q are not an object", c.Name, c.Arguments)
		}
	}
}

// streamParse feeds text in pieces and returns what was shown while
// streaming, what Close returned, and the calls.
func streamParse(f ToolFormat, pieces []string) (streamed, closed string, calls []ToolCall) {
	s := f.NewStream(parseTools)
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(s.Write(p))
	}
	closed, calls = s.Close()
	return b.String(), closed, calls
}

// TestToolStreamSplits: however a reply is split, the stream gives what
// Parse gives.
func TestToolStreamSplits(t *testing.T) {
	for _, c := range parseCases {
		bytes := make([]string, len(c.text))
		for i := range c.text {
			bytes[i] = c.text[i : i+1]
		}
		splits := [][]string{bytes}
		for i := 0; i <= len(c.text); i++ {
			splits = append(splits, []string{c.text[:i], c.text[i:]})
		}
		for _, pieces := range splits {
			streamed, closed, calls := streamParse(c.format, pieces)
			if streamed+closed != c.content || !equalCalls(callsOf(calls), c.calls) {
				t.Errorf("%s split %q: got %q+%q %v, want %q %v", c.name, pieces, streamed, closed, callsOf(calls), c.content, c.calls)
				break
			}
		}
	}
}

// TestToolStreamHoldsMarkers: content shows as it comes, a marker never.
func TestToolStreamHoldsMarkers(t *testing.T) {
	for _, c := range []struct {
		format ToolFormat
		pieces []string
		shown  []string // what each Write returns
		closed string
		calls  int
	}{
		{ToolFormatHermes, []string{"Let me", " check.", "\n<tool", "_call>\n{\"name\": \"get_time\",", " \"arguments\": {}}\n</tool_call>"},
			[]string{"Let me", " check.", "", "", ""}, "", 1},
		{ToolFormatHermes, []string{"a <tool", "box> b"}, []string{"a", " <toolbox> b"}, "", 0},
		{ToolFormatMistralArgs, []string{"Ok", "[TOOL_", "CALLS]get_time", "[ARGS]{}"}, []string{"Ok", "", "", ""}, "", 1},
		{ToolFormatGeneric, []string{`{"resp`, `onse": "Hel`, `lo \`, `"you\"`, `"}`}, []string{"", "Hel", "lo ", `"you"`, ""}, "", 0},
		{ToolFormatGeneric, []string{" ", `{"tool_calls": [{"name": "get_time", `, `"arguments": {}}]}`}, []string{"", "", ""}, "", 1},
		{ToolFormatLlama3, []string{"  ", "Hi", " there"}, []string{"", "  Hi", " there"}, "", 0},
		{ToolFormatLlama3, []string{"<|python", "_tag|>{\"name\": \"get_time\", \"parameters\": {}}"}, []string{"", ""}, "", 1},
	} {
		s := c.format.NewStream(parseTools)
		for i, p := range c.pieces {
			if got := s.Write(p); got != c.shown[i] {
				t.Errorf("%s %q: Write(%q) = %q, want %q", c.format, c.pieces, p, got, c.shown[i])
			}
		}
		closed, calls := s.Close()
		if closed != c.closed || len(calls) != c.calls {
			t.Errorf("%s %q: Close = %q, %d calls; want %q, %d", c.format, c.pieces, closed, len(calls), c.closed, c.calls)
		}
	}
}

// TestToolStreamBounds: a tool call beyond MaxToolCallsBytes is content,
// shown as soon as it is known to be too big.
func TestToolStreamBounds(t *testing.T) {
	huge := `<tool_call>{"name": "get_weather", "arguments": {"city": "` + strings.Repeat("x", MaxToolCallsBytes) + `"}}</tool_call>`
	content, calls := ToolFormatHermes.Parse(huge, parseTools)
	if content != huge || calls != nil {
		t.Fatalf("huge call: %d bytes of content, %d calls", len(content), len(calls))
	}
	s := ToolFormatHermes.NewStream(parseTools)
	if got := s.Write(huge[:100]); got != "" {
		t.Fatalf("shown early: %q", got)
	}
	if got := s.Write(huge[100:]); got != huge {
		t.Fatalf("not shown when too big: %d bytes", len(got))
	}
	// White space is held piece by piece at the cost of each piece (a
	// quadratic hold would take minutes here).
	for _, f := range []ToolFormat{ToolFormatHermes, ToolFormatLlama3, ToolFormatGeneric} {
		s := f.NewStream(parseTools)
		for range 300_000 {
			if got := s.Write(" "); got != "" {
				t.Fatalf("%s: white space shown before it is decided: %q", f, got)
			}
		}
		if got := s.Write("x"); len(got) != 300_001 {
			t.Fatalf("%s: %d bytes shown, want the white space and x", f, len(got))
		}
	}
	// Many calls: at most maxToolCalls are parsed, the rest is content.
	many := strings.Repeat(`<tool_call>{"name":"get_time"}</tool_call>`, maxToolCalls+3)
	content, calls = ToolFormatHermes.Parse(many, parseTools)
	if len(calls) != maxToolCalls || strings.Count(content, "<tool_call>") != 3 {
		t.Fatalf("%d calls, content %q", len(calls), content)
	}
	// Deep arguments are content, not a crash.
	deep := `{"name": "get_time", "parameters": ` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + "}"
	if content, calls := ToolFormatLlama3.Parse(deep, parseTools); content != deep || calls != nil {
		t.Fatalf("deep arguments: %d calls", len(calls))
	}
}
