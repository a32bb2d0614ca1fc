package httpapi

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func scrape(t *testing.T, srv *Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestMetrics(t *testing.T) {
	srv, eng, base := newTestServer(t)
	chat := `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]}`
	for range 2 {
		if status, _, body := post(t, base, "/v1/chat/completions", chat); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	post(t, base, "/api/generate", `{"model":"stories260K","prompt":"hi","options":{"num_predict":4}}`)
	post(t, base, "/api/generate", `{"model":"nope","prompt":"hi"}`)
	prompt, _ := eng.Tokenize("<|user|>hi\n<|assistant|>")
	n := len(prompt)

	got := scrape(t, srv)
	for _, want := range []string{
		`meshllm_http_requests_total{api="openai",endpoint="/v1/chat/completions",status="200"} 2`,
		`meshllm_http_requests_total{api="ollama",endpoint="/api/generate",status="200"} 1`,
		`meshllm_http_requests_total{api="ollama",endpoint="/api/generate",status="404"} 1`,
		`meshllm_prompt_tokens_total{api="openai"} ` + itoa(2*n),
		`meshllm_cached_prompt_tokens_total{api="openai"} ` + itoa(n-1),
		`meshllm_generated_tokens_total{api="openai"} 20`,
		`meshllm_generated_tokens_total{api="ollama"} 4`,
		`meshllm_time_to_first_token_seconds_count{api="openai"} 2`,
		`meshllm_http_request_duration_seconds_count{api="openai",endpoint="/v1/chat/completions"} 2`,
		`meshllm_engine_queued_requests 3`,
		`meshllm_engine_slots 2`,
		`meshllm_engine_served_requests_total 3`,
		`meshllm_http_requests_in_flight 1`, // the scrape itself
		`go_goroutines `,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", grepLines(got, "meshllm_"))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
