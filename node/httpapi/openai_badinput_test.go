package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// TestOpenAIBadNewFields sends bad values of every field added for tools,
// structured outputs, logprobs, penalties, embeddings and responses, and
// the fields that are refused: each is a 400 in OpenAI's error shape that
// names the param.
func TestOpenAIBadNewFields(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],` + extra + `}`
	}
	tool := `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}`
	var many []string
	for i := range 129 {
		many = append(many, fmt.Sprintf(`{"type":"function","function":{"name":"f%d"}}`, i))
	}
	deep := strings.Repeat(`{"type":"array","items":`, 70) + `{}` + strings.Repeat(`}`, 70)
	big := `{"type":"object","description":"` + strings.Repeat("d", 70<<10) + `"}`
	cases := []struct {
		name, path, body, param, want string
	}{
		// tools and tool_choice
		{"tool type", "/v1/chat/completions", chat(`"tools":[{"type":"custom","custom":{"name":"x"}}]`), "tools", `"custom" is not supported`},
		{"tool without function", "/v1/chat/completions", chat(`"tools":[{"type":"function"}]`), "tools", "function is required"},
		{"tool name", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"a b"}}]`), "tools", "tool name"},
		{"tool name empty", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":""}}]`), "tools", "1 to 64 bytes"},
		{"tool duplicate", "/v1/chat/completions", chat(`"tools":[` + tool + `,` + tool + `]`), "tools", "duplicate"},
		{"too many tools", "/v1/chat/completions", chat(`"tools":[` + strings.Join(many, ",") + `]`), "tools", "at most 128"},
		{"tool description", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"f","description":"` + strings.Repeat("d", 17<<10) + `"}}]`), "tools", "description has"},
		{"tool parameters", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`), "tools", "not a JSON object"},
		{"tool parameters size", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"f","parameters":` + big + `}}]`), "tools", "bytes"},
		{"tools type", "/v1/chat/completions", chat(`"tools":{"a":1}`), "tools", "tools"},
		{"tool_choice word", "/v1/chat/completions", chat(`"tools":[` + tool + `],"tool_choice":"sometimes"`), "tool_choice", `"sometimes" is not supported`},
		{"tool_choice no name", "/v1/chat/completions", chat(`"tools":[` + tool + `],"tool_choice":{"type":"function"}`), "tool_choice", "name is required"},
		{"tool_choice unknown", "/v1/chat/completions", chat(`"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"nope"}}`), "tool_choice", `"nope", which is not among the tools`},
		{"tool_choice allowed_tools", "/v1/chat/completions", chat(`"tools":[` + tool + `],"tool_choice":{"type":"allowed_tools"}`), "tool_choice", "allowed_tools"},
		{"tool_choice without tools", "/v1/chat/completions", chat(`"tool_choice":"required"`), "tool_choice", "needs tools"},
		{"tool_choice number", "/v1/chat/completions", chat(`"tools":[` + tool + `],"tool_choice":5`), "tool_choice", "tool_choice must be"},
		{"parallel_tool_calls type", "/v1/chat/completions", chat(`"parallel_tool_calls":"yes"`), "parallel_tool_calls", "parallel_tool_calls"},
		{"tool message without id", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"tool","content":"x"}]}`, "messages", "tool_call_id is required"},
		{"tool message without content", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"tool","tool_call_id":"c"}]}`, "messages", "content is required"},
		{"call arguments", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]},{"role":"user","content":"x"}]}`, "messages", "arguments must be a JSON object"},
		{"call arguments array", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]},{"role":"user","content":"x"}]}`, "messages", "arguments must be a JSON object"},
		{"call without name", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]},{"role":"user","content":"x"}]}`, "messages", "name is required"},
		{"call type", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","function":{"name":"f"}}]},{"role":"user","content":"x"}]}`, "messages", `"custom" is not supported`},
		{"calls on a user message", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"x","tool_calls":[{"id":"c","function":{"name":"f"}}]}]}`, "messages", "only assistant messages"},
		{"function role", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages", `"function" is not supported`},
		// response_format
		{"response_format type", "/v1/chat/completions", chat(`"response_format":{"type":"xml"}`), "response_format", `"xml" is not supported`},
		{"json_schema missing", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema"}`), "response_format", "json_schema is required"},
		{"schema missing", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), "response_format", "schema is required"},
		{"schema not object", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}}`), "response_format", "must be a JSON object"},
		{"schema too deep", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + deep + `}}`), "response_format", "deeper than"},
		{"schema too big", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + big + `}}`), "response_format", "at most 65536"},
		{"schema name", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"` + strings.Repeat("n", 65) + `","schema":{}}}`), "response_format", "name has 65 bytes"},
		{"format with tools", "/v1/chat/completions", chat(`"tools":[` + tool + `],"response_format":{"type":"json_object"}`), "response_format", "cannot be combined with tools"},
		// logprobs and penalties
		{"logprobs type", "/v1/chat/completions", chat(`"logprobs":1`), "logprobs", "logprobs"},
		{"top_logprobs range", "/v1/chat/completions", chat(`"logprobs":true,"top_logprobs":21`), "top_logprobs", "between 0 and 20"},
		{"top_logprobs alone", "/v1/chat/completions", chat(`"top_logprobs":2`), "top_logprobs", "needs logprobs"},
		{"presence_penalty", "/v1/chat/completions", chat(`"presence_penalty":2.5`), "presence_penalty", "between -2 and 2"},
		{"frequency_penalty", "/v1/chat/completions", chat(`"frequency_penalty":-3`), "frequency_penalty", "between -2 and 2"},
		{"completions logprobs", "/v1/completions", `{"model":"stories260K","prompt":"x","logprobs":6}`, "logprobs", "between 0 and 5"},
		{"completions logprobs type", "/v1/completions", `{"model":"stories260K","prompt":"x","logprobs":true}`, "logprobs", "logprobs"},
		{"completions penalty", "/v1/completions", `{"model":"stories260K","prompt":"x","presence_penalty":9}`, "presence_penalty", "between -2 and 2"},
		// refused fields
		{"audio", "/v1/chat/completions", chat(`"audio":{"voice":"alloy","format":"mp3"}`), "audio", "audio"},
		{"modalities", "/v1/chat/completions", chat(`"modalities":["text","audio"]`), "modalities", "text"},
		{"logit_bias", "/v1/chat/completions", chat(`"logit_bias":{"50256":-100}`), "logit_bias", "not supported"},
		{"completions logit_bias", "/v1/completions", `{"model":"stories260K","prompt":"x","logit_bias":{"5":1}}`, "logit_bias", "not supported"},
		{"functions", "/v1/chat/completions", chat(`"functions":[{"name":"f"}]`), "functions", "use tools"},
		{"function_call", "/v1/chat/completions", chat(`"function_call":"auto"`), "function_call", "tool_choice"},
		{"prediction", "/v1/chat/completions", chat(`"prediction":{"type":"content","content":"x"}`), "prediction", "predicted"},
		{"reasoning_effort", "/v1/chat/completions", chat(`"reasoning_effort":"high"`), "reasoning_effort", "reasoning"},
		{"verbosity", "/v1/chat/completions", chat(`"verbosity":"low"`), "verbosity", "verbosity"},
		{"web_search_options", "/v1/chat/completions", chat(`"web_search_options":{"search_context_size":"low"}`), "web_search_options", "web"},
		{"store", "/v1/chat/completions", chat(`"store":true`), "store", "store=true"},
		// embeddings
		{"embed encoding", "/v1/embeddings", `{"model":"stories260K","input":"hi","encoding_format":"hex"}`, "encoding_format", `"hex"`},
		{"embed dimensions 0", "/v1/embeddings", `{"model":"stories260K","input":"hi","dimensions":0}`, "dimensions", "between 1 and 8"},
		{"embed dimensions wide", "/v1/embeddings", `{"model":"stories260K","input":"hi","dimensions":9}`, "dimensions", "between 1 and 8"},
		{"embed no input", "/v1/embeddings", `{"model":"stories260K"}`, "input", "input is required"},
		{"embed no model", "/v1/embeddings", `{"input":"hi"}`, "model", "model is required"},
		{"embed empty list", "/v1/embeddings", `{"model":"stories260K","input":[]}`, "input", "input is empty"},
		{"embed empty string", "/v1/embeddings", `{"model":"stories260K","input":["a",""]}`, "input", "input[1] is empty"},
		{"embed empty tokens", "/v1/embeddings", `{"model":"stories260K","input":[[1],[]]}`, "input", "input[1] is empty"},
		{"embed mixed", "/v1/embeddings", `{"model":"stories260K","input":["a",[1]]}`, "input", "input must be"},
		{"embed float tokens", "/v1/embeddings", `{"model":"stories260K","input":[1.5]}`, "input", "input must be"},
		{"embed object", "/v1/embeddings", `{"model":"stories260K","input":{"a":1}}`, "input", "input must be"},
		{"embed too long", "/v1/embeddings", `{"model":"stories260K","input":"` + strings.Repeat("x", 80) + `"}`, "input", "embedding context holds 64"},
		{"embed vocab", "/v1/embeddings", `{"model":"stories260K","input":[[1,99999]]}`, "input", "vocabulary"},
		{"embed too many", "/v1/embeddings", `{"model":"stories260K","input":[` + strings.Repeat(`"a",`, 2048) + `"a"]}`, "input", "at most 2048"},
		// responses
		{"responses tools", "/v1/responses", `{"model":"stories260K","input":"hi","tools":[{"type":"function","name":"f"}]}`, "tools", "/v1/chat/completions"},
		{"responses previous", "/v1/responses", `{"model":"stories260K","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", "stores no responses"},
		{"responses store", "/v1/responses", `{"model":"stories260K","input":"hi","store":true}`, "store", "store=true"},
		{"responses background", "/v1/responses", `{"model":"stories260K","input":"hi","background":true}`, "background", "background"},
		{"responses include", "/v1/responses", `{"model":"stories260K","input":"hi","include":["reasoning.encrypted_content"]}`, "include", "include"},
		{"responses reasoning", "/v1/responses", `{"model":"stories260K","input":"hi","reasoning":{"effort":"low"}}`, "reasoning", "reasoning"},
		{"responses top_logprobs", "/v1/responses", `{"model":"stories260K","input":"hi","top_logprobs":3}`, "top_logprobs", "top_logprobs"},
		{"responses tool_choice", "/v1/responses", `{"model":"stories260K","input":"hi","tool_choice":"required"}`, "tool_choice", "no tools"},
		{"responses item type", "/v1/responses", `{"model":"stories260K","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input", `"function_call_output" is not supported`},
		{"responses image", "/v1/responses", `{"model":"stories260K","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input", "input_image"},
		{"responses role", "/v1/responses", `{"model":"stories260K","input":[{"role":"tool","content":"x"}]}`, "input", `"tool" is not supported`},
		{"responses no input", "/v1/responses", `{"model":"stories260K"}`, "input", "input is required"},
		{"responses empty input", "/v1/responses", `{"model":"stories260K","input":""}`, "input", "input is empty"},
		{"responses input type", "/v1/responses", `{"model":"stories260K","input":5}`, "input", "input must be"},
		{"responses truncation", "/v1/responses", `{"model":"stories260K","input":"hi","truncation":"sometimes"}`, "truncation", "truncation"},
		{"responses max_output_tokens", "/v1/responses", `{"model":"stories260K","input":"hi","max_output_tokens":0}`, "max_output_tokens", "at least 1"},
		{"responses temperature", "/v1/responses", `{"model":"stories260K","input":"hi","temperature":5}`, "temperature", "temperature"},
		{"responses format", "/v1/responses", `{"model":"stories260K","input":"hi","text":{"format":{"type":"xml"}}}`, "text", `"xml"`},
		{"responses schema", "/v1/responses", `{"model":"stories260K","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":"no"}}}`, "text", "must be a JSON object"},
		{"responses too long", "/v1/responses", `{"model":"stories260K","input":"` + strings.Repeat("x", 600) + `"}`, "input", "context holds 512"},
	}
	_, _, url := newTestServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, hdr, body := post(t, url, c.path, c.body)
			checkError(t, errorCase{path: c.path, status: 400, want: c.want}, status, hdr, body)
			var e openAIErrorEnvelope
			mustJSON(t, body, &e)
			if e.Error.Param == nil || *e.Error.Param != c.param {
				t.Errorf("param %v, want %q: %s", e.Error.Param, c.param, body)
			}
		})
	}
}
