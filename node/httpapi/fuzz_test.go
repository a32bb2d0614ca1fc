package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// fuzzEndpoint posts arbitrary bytes to one endpoint of a server over the
// fake engine: nothing may panic, and the answer is a success or a 4xx in
// the endpoint's error shape — never a 5xx.
func fuzzEndpoint(f *testing.F, path string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(""))
	f.Add([]byte("{"))
	f.Add([]byte("null"))
	f.Add([]byte("{\"model\":\"stories260K\",\"prompt\":\"\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}"))
	cfg := DefaultConfig()
	cfg.MaxBodyBytes = 64 << 10
	srv, err := NewServer(cfg, newFakeEngine())
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		switch {
		case rec.Code == 200:
		case rec.Code >= 400 && rec.Code < 500:
			var shape map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &shape); err != nil || shape["error"] == nil {
				t.Fatalf("%d with body %q", rec.Code, rec.Body.String())
			}
			if strings.HasPrefix(path, "/v1/") {
				var e openAIErrorEnvelope
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
					t.Fatalf("not an OpenAI error: %q", rec.Body.String())
				}
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
	})
}

func FuzzChatRequest(f *testing.F) {
	fuzzEndpoint(f, "/v1/chat/completions",
		`{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"model":"stories260K","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"stop":["a"],"temperature":0.2,"top_k":4,"seed":1}`,
		`{"model":"stories260K","messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto","parallel_tool_calls":false}`,
		`{"model":"stories260K","stream":true,"messages":[{"role":"user","content":"w?"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"model":"stories260K","messages":[{"role":"user","content":"json"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}`,
		`{"model":"stories260K","messages":[{"role":"user","content":"json"}],"response_format":{"type":"json_object"},"logprobs":true,"top_logprobs":3,"presence_penalty":0.5,"frequency_penalty":-0.5,"max_completion_tokens":99999}`,
	)
}

func FuzzEmbeddingsRequest(f *testing.F) {
	fuzzEndpoint(f, "/v1/embeddings",
		`{"model":"stories260K","input":["a b","c"],"encoding_format":"base64","dimensions":4}`,
		`{"model":"stories260K","input":[[1,2,3],[4]],"user":"u"}`,
	)
}

func FuzzResponsesRequest(f *testing.F) {
	fuzzEndpoint(f, "/v1/responses",
		`{"model":"stories260K","input":"hi","instructions":"s","max_output_tokens":3,"temperature":0.2,"top_p":0.9}`,
		`{"model":"stories260K","stream":true,"truncation":"auto","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"text":{"format":{"type":"json_object"}}}`,
	)
}

func FuzzCompletionRequest(f *testing.F) {
	fuzzEndpoint(f, "/v1/completions",
		`{"model":"stories260K","prompt":"Once","max_tokens":2,"stop":"x"}`,
		`{"model":"stories260K","prompt":[[1,2,3]],"stream":true}`,
	)
}

func FuzzGenerateRequest(f *testing.F) {
	fuzzEndpoint(f, "/api/generate",
		`{"model":"stories260K","prompt":"Once","system":"s","options":{"num_predict":3,"temperature":0.1,"stop":["x"]}}`,
		`{"model":"stories260K","prompt":"Once","raw":true,"stream":false}`,
	)
}

func FuzzOllamaChatRequest(f *testing.F) {
	fuzzEndpoint(f, "/api/chat",
		`{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"options":{"top_k":3,"seed":5}}`,
		`{"model":"stories260K:latest","stream":false,"messages":[{"role":"system","content":"a"},{"role":"user","content":"b"}]}`,
	)
}
