package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
)

// errorCase is one bad request sent to one endpoint.
type errorCase struct {
	name   string
	path   string
	body   string
	status int
	want   string // substring of the error message
	code   string // OpenAI error code, when checked
}

func TestErrorsRaw(t *testing.T) {
	long := strings.Repeat("a", 600) // 600 tokens > the fake's 512 context
	cases := []errorCase{
		// OpenAI chat.
		{"malformed", "/v1/chat/completions", `{"model":`, 400, "invalid JSON", ""},
		{"not an object", "/v1/chat/completions", `[1,2]`, 400, "JSON object", ""},
		{"trailing data", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]} {}`, 400, "after the top-level", ""},
		{"empty body", "/v1/chat/completions", ``, 400, "empty", ""},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model is required", "missing_required_parameter"},
		{"missing messages", "/v1/chat/completions", `{"model":"stories260K"}`, 400, "messages is required", "missing_required_parameter"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-5","messages":[{"role":"user","content":"hi"}]}`, 404, `"gpt-5" not found`, "model_not_found"},
		{"too long", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"` + long + `"}]}`, 400, "context holds 512", "context_length_exceeded"},
		{"huge max_tokens", "/v1/chat/completions", `{"model":"stories260K","max_tokens":1e30,"messages":[{"role":"user","content":"hi"}]}`, 400, "max_tokens", ""},
		{"zero max_completion_tokens", "/v1/chat/completions", `{"model":"stories260K","max_completion_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, "max_completion_tokens must be at least 1", ""},
		{"invalid utf-8", "/v1/chat/completions", "{\"model\":\"stories260K\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "UTF-8", "invalid_utf8"},
		{"bad role", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"function","content":"x"}]}`, 400, "role", ""},
		{"image part", "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "image_url", ""},
		{"temperature", "/v1/chat/completions", `{"model":"stories260K","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, 400, "temperature", ""},
		{"top_p", "/v1/chat/completions", `{"model":"stories260K","top_p":-1,"messages":[{"role":"user","content":"hi"}]}`, 400, "top_p", ""},
		{"n", "/v1/chat/completions", `{"model":"stories260K","n":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "n must be 1", ""},
		{"stop type", "/v1/chat/completions", `{"model":"stories260K","stop":5,"messages":[{"role":"user","content":"hi"}]}`, 400, "stop must be", ""},
		{"wrong type", "/v1/chat/completions", `{"model":7,"messages":[]}`, 400, `"model"`, ""},
		{"tools", "/v1/chat/completions", `{"model":"stories260K","tools":[{"type":"function"}],"messages":[{"role":"user","content":"hi"}]}`, 400, "tools", ""},
		// OpenAI completions.
		{"missing prompt", "/v1/completions", `{"model":"stories260K"}`, 400, "prompt is required", ""},
		{"two prompts", "/v1/completions", `{"model":"stories260K","prompt":["a","b"]}`, 400, "one prompt", ""},
		{"token outside vocab", "/v1/completions", `{"model":"stories260K","prompt":[1,99999]}`, 400, "vocabulary", ""},
		{"prompt too long", "/v1/completions", `{"model":"stories260K","prompt":"` + long + `"}`, 400, "shorten the prompt", "context_length_exceeded"},
		{"unknown model completions", "/v1/completions", `{"model":"x","prompt":"hi"}`, 404, "not found", "model_not_found"},
		// Ollama.
		{"ollama malformed", "/api/generate", `{"model":"stories260K",`, 400, "invalid JSON", ""},
		{"ollama missing model", "/api/generate", `{"prompt":"hi"}`, 400, "model is required", ""},
		{"ollama unknown model", "/api/generate", `{"model":"llama3","prompt":"hi"}`, 404, `"llama3" not found`, ""},
		{"ollama too long", "/api/generate", `{"model":"stories260K","prompt":"` + long + `"}`, 400, "context holds 512", ""},
		{"ollama bad num_predict", "/api/generate", `{"model":"stories260K","prompt":"hi","options":{"num_predict":-5}}`, 400, "num_predict must be", ""},
		{"ollama invalid utf-8", "/api/generate", "{\"model\":\"stories260K\",\"prompt\":\"a\xc3\x28\"}", 400, "UTF-8", ""},
		{"ollama options type", "/api/generate", `{"model":"stories260K","prompt":"hi","options":{"top_k":1.5}}`, 400, "top_k", ""},
		{"ollama options not object", "/api/generate", `{"model":"stories260K","prompt":"hi","options":[1]}`, 400, "options must be", ""},
		{"ollama images", "/api/generate", `{"model":"stories260K","prompt":"hi","images":["aGk="]}`, 400, "images", ""},
		{"ollama format", "/api/generate", `{"model":"stories260K","prompt":"hi","format":"yaml"}`, 400, "invalid format", ""},
		{"ollama chat missing model", "/api/chat", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model is required", ""},
		{"ollama chat unknown model", "/api/chat", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404, "not found", ""},
		{"ollama chat bad role", "/api/chat", `{"model":"stories260K","messages":[{"role":"robot","content":"hi"}]}`, 400, "role", ""},
		{"ollama chat tools", "/api/chat", `{"model":"stories260K","tools":[{"type":"function"}],"messages":[{"role":"user","content":"hi"}]}`, 400, "tools", ""},
		{"ollama chat malformed", "/api/chat", `nope`, 400, "invalid JSON", ""},
		{"ollama show missing", "/api/show", `{}`, 400, "model is required", ""},
	}
	_, _, base := newTestServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, hdr, body := post(t, base, c.path, c.body)
			checkError(t, c, status, hdr, body)
		})
	}
}

// checkError checks status, content type and the API's error shape.
func checkError(t *testing.T, c errorCase, status int, hdr http.Header, body []byte) {
	t.Helper()
	if status != c.status {
		t.Errorf("status %d, want %d: %s", status, c.status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if strings.HasPrefix(c.path, "/v1/") {
		var e openAIErrorEnvelope
		mustJSON(t, body, &e)
		if !strings.Contains(e.Error.Message, c.want) || e.Error.Type == "" {
			t.Errorf("error %s, want message containing %q", body, c.want)
		}
		if c.code != "" && (e.Error.Code == nil || *e.Error.Code != c.code) {
			t.Errorf("error %s, want code %q", body, c.code)
		}
		return
	}
	var e map[string]any
	mustJSON(t, body, &e)
	msg, _ := e["error"].(string)
	if len(e) != 1 || !strings.Contains(msg, c.want) {
		t.Errorf("error %s, want {\"error\": ...%q...}", body, c.want)
	}
}

func TestEngineErrorsMapToStatus(t *testing.T) {
	cases := []struct {
		err            error
		openai, ollama int
		retryAfter     bool
	}{
		{infer.ErrBusy, 429, 503, true},
		{infer.ErrClosed, 503, 503, true},
		{infer.ErrEngine, 500, 500, false},
		{fmt.Errorf("cuda exploded"), 500, 500, false},
		{infer.BadRequestf("bad seed"), 400, 400, false},
		{infer.ErrUnknownModel, 404, 404, false},
		{&infer.ContextError{PromptTokens: 9, ContextLength: 8}, 400, 400, false},
	}
	for _, c := range cases {
		_, eng, base := newTestServer(t)
		eng.set(func(f *fakeEngine) { f.err = c.err })
		for _, stream := range []bool{false, true} {
			status, hdr, body := post(t, base, "/v1/chat/completions",
				fmt.Sprintf(`{"model":"stories260K","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
			if status != c.openai || (hdr.Get("Retry-After") == "1") != c.retryAfter {
				t.Errorf("%v openai stream=%v: %d Retry-After %q: %s", c.err, stream, status, hdr.Get("Retry-After"), body)
			}
			status, hdr, body = post(t, base, "/api/generate", fmt.Sprintf(`{"model":"stories260K","stream":%v,"prompt":"hi"}`, stream))
			if status != c.ollama || (hdr.Get("Retry-After") == "1") != c.retryAfter {
				t.Errorf("%v ollama stream=%v: %d Retry-After %q: %s", c.err, stream, status, hdr.Get("Retry-After"), body)
			}
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	_, _, base := newTestServer(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	big := `{"model":"stories260K","prompt":"` + strings.Repeat("x", 2000) + `"}`
	for _, path := range []string{"/v1/completions", "/api/generate", "/v1/chat/completions", "/api/chat"} {
		status, hdr, body := post(t, base, path, big)
		checkError(t, errorCase{path: path, status: 413, want: "exceeds 1024 bytes"}, status, hdr, body)
	}
}

func TestMaxPromptTokensAndMaxTokensLimit(t *testing.T) {
	_, _, base := newTestServer(t, func(c *Config) { c.MaxPromptTokens = 10; c.MaxTokensLimit = 64 })
	status, hdr, body := post(t, base, "/v1/completions", `{"model":"stories260K","prompt":"this prompt is too long"}`)
	checkError(t, errorCase{path: "/v1/completions", status: 400, want: "at most 10"}, status, hdr, body)
	status, hdr, body = post(t, base, "/v1/completions", `{"model":"stories260K","prompt":"ok","max_tokens":65}`)
	checkError(t, errorCase{path: "/v1/completions", status: 400, want: "(64,"}, status, hdr, body)
	status, _, body = post(t, base, "/v1/completions", `{"model":"stories260K","prompt":"ok","max_tokens":64}`)
	if status != 200 {
		t.Errorf("max_tokens at the limit: %d %s", status, body)
	}
}

func TestRoutingErrors(t *testing.T) {
	_, _, base := newTestServer(t)
	status, hdr, body := get(t, base, "/v1/chat/completions")
	if status != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET chat: %d Allow %q %s", status, hdr.Get("Allow"), body)
	}
	checkError(t, errorCase{path: "/v1/x", status: 405, want: "not allowed"}, status, hdr, body)
	status, hdr, body = get(t, base, "/v1/nothing")
	checkError(t, errorCase{path: "/v1/nothing", status: 404, want: "no such endpoint"}, status, hdr, body)
	status, hdr, body = get(t, base, "/api/nothing")
	checkError(t, errorCase{path: "/api/nothing", status: 404, want: "no such endpoint"}, status, hdr, body)
}

func TestAuth(t *testing.T) {
	_, _, base := newTestServer(t, func(c *Config) { c.APIToken = "s3cret" })
	chat := `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]}`
	status, hdr, body := post(t, base, "/v1/chat/completions", chat)
	checkError(t, errorCase{path: "/v1/", status: 401, want: "API token"}, status, hdr, body)
	status, hdr, body = post(t, base, "/api/chat", chat, "Authorization", "Bearer wrong")
	checkError(t, errorCase{path: "/api/", status: 401, want: "API token"}, status, hdr, body)
	if status, _, _ := get(t, base, "/metrics"); status != 401 {
		t.Errorf("metrics without token: %d", status)
	}
	if status, _, _ := get(t, base, "/healthz"); status != 200 {
		t.Errorf("healthz without token: %d", status)
	}
	if status, _, body := post(t, base, "/v1/chat/completions", chat, "Authorization", "Bearer s3cret"); status != 200 {
		t.Errorf("with token: %d %s", status, body)
	}
}
