package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// completionServer answers /v1/completions with body (a JSON object, or
// SSE lines when the request streams).
func completionServer(t *testing.T, body string, stream bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestCompleteChecksWholeAnswers(t *testing.T) {
	cases := []struct {
		name, body string
		stream     bool
		max        int
		wantErr    string
	}{
		{"whole", `{"choices":[{"text":"hi there","finish_reason":"length"}],"usage":{"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":5}}}`, false, 2, ""},
		{"stopped early is fine", `{"choices":[{"text":"hi","finish_reason":"stop"}],"usage":{"completion_tokens":1}}`, false, 8, ""},
		{"short of max_tokens", `{"choices":[{"text":"hi","finish_reason":"length"}],"usage":{"completion_tokens":1}}`, false, 2, "after 1 of 2"},
		{"no finish reason", `{"choices":[{"text":"hi"}],"usage":{"completion_tokens":1}}`, false, 2, "finish reason"},
		{"stream whole", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", true, 2, ""},
		{"stream cut before [DONE]", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", true, 2, "without [DONE]"},
		{"stream garbage", "data: {nope\n\n", true, 2, "bad chunk"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := completionServer(t, c.body, c.stream)
			a, err := Complete(context.Background(), http.DefaultClient, addr, Ask{Prompt: "x", MaxTokens: c.max, Stream: c.stream})
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			case c.wantErr == "" && a.Text == "":
				t.Fatalf("no text in %+v", a)
			}
		})
	}
}

func TestSummarizeAndPercentile(t *testing.T) {
	var rs []Result
	for i := 1; i <= 100; i++ {
		rs = append(rs, Result{Answer: Answer{Latency: time.Duration(i) * time.Millisecond}})
	}
	rs = append(rs, Result{Err: fmt.Errorf("boom")})
	s := Summarize(rs)
	if s.Requests != 101 || s.Failures != 1 || len(s.Errors) != 1 {
		t.Fatalf("counts: %+v", s)
	}
	if s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("percentiles: %v %v %v", s.P50, s.P99, s.Max)
	}
	if Percentile(nil, 99) != 0 {
		t.Fatal("percentile of nothing")
	}
}

func TestDriverCountsFailuresAndWaits(t *testing.T) {
	ok := completionServer(t, `{"choices":[{"text":"x","finish_reason":"stop"}],"usage":{"completion_tokens":1}}`, false)
	d := &Driver{Workers: 2, Ask: func(w, seq int) Ask { return Ask{Prompt: "p", MaxTokens: 1} },
		Target: func(w, seq int) string {
			if w == 1 && seq == 3 {
				return "127.0.0.1:1" // nothing listens: a failure
			}
			return ok
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Result)
	go func() { done <- d.Run(ctx) }()
	if _, err := d.WaitResult(ctx, 30*time.Second, func(r Result) bool { return r.Worker == 1 && r.Seq == 5 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	s := Summarize(<-done)
	if s.Failures != 1 || s.Requests < 6 {
		t.Fatalf("%+v, want exactly one failure among at least 6 requests", s)
	}
}
