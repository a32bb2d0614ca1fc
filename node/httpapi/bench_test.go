package httpapi

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
)

// The benchmarks measure the HTTP layer's own cost per request over the
// fake engine (which costs next to nothing): decoding, templating,
// tokenizing, encoding and streaming 10 pieces. docs/api.md records the
// figures.

func benchServer(b *testing.B) *Server {
	b.Helper()
	eng := newFakeEngine()
	eng.info.ContextLength = 4096
	srv, err := NewServer(DefaultConfig(), eng)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// fewShotBody is a chat request about the size of an MMLU 5-shot prompt
// (about 3 KB of text).
func fewShotBody(stream bool) []byte {
	shot := `{"role":"user","content":"The following are multiple choice questions about anatomy. ` +
		strings.Repeat("What is the name of the bone? A. femur B. tibia C. ulna D. radius Answer: A ", 36) + `"}`
	s := "false"
	if stream {
		s = "true"
	}
	return []byte(`{"model":"stories260K","stream":` + s + `,"messages":[` + shot + `]}`)
}

func benchPost(b *testing.B, srv *Server, path string, body []byte) {
	h := srv.Handler()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkChatCompletion(b *testing.B) {
	benchPost(b, benchServer(b), "/v1/chat/completions", fewShotBody(false))
}

func BenchmarkChatCompletionStream(b *testing.B) {
	benchPost(b, benchServer(b), "/v1/chat/completions", fewShotBody(true))
}

func BenchmarkOllamaChatStream(b *testing.B) {
	benchPost(b, benchServer(b), "/api/chat", fewShotBody(true))
}

func BenchmarkDecodeChatRequest(b *testing.B) {
	body := fewShotBody(true)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req chatRequest
		if e := decodeJSON(body, &req); e != nil {
			b.Fatal(e)
		}
	}
}
