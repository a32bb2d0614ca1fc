package real

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeMesh is a set of fake OpenAI peers sharing one bookkeeping: each
// peer keeps the prompts it served and reports the longest common prefix
// with any of them as cached; requests entering at a peer listed in
// forwardTo are "forwarded" (served by the other peer, counted as such in
// both peers' counters, the way meshllm's router counts them).
type fakeMesh struct {
	t         *testing.T
	forwardTo map[int]int
	fail      func(n int) bool // n-th request overall fails with 503 when true

	mu       sync.Mutex
	n        int
	seen     [][][]int32 // per serving peer
	log      []fakeReq
	counters []Counters
	urls     []string
}

type fakeReq struct {
	entry, server  int
	prompt, cached int
	maxTokens      int
}

func newFakeMesh(t *testing.T, peers int, forwardTo map[int]int) *fakeMesh {
	m := &fakeMesh{t: t, forwardTo: forwardTo, seen: make([][][]int32, peers), counters: make([]Counters, peers)}
	for i := range peers {
		srv := httptest.NewServer(m.handler(i))
		t.Cleanup(srv.Close)
		m.urls = append(m.urls, srv.URL)
	}
	return m
}

func (m *fakeMesh) handler(peer int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"model_info":{"meshllm.vocab_size":512,"meshllm.context_length":2048}}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		c := m.counters[peer]
		m.mu.Unlock()
		fmt.Fprintf(w, "# HELP meshllm_router_served_total Requests finished.\n# TYPE meshllm_router_served_total counter\n")
		fmt.Fprintf(w, "meshllm_router_served_total{where=\"local\"} %g\n", c.Local)
		fmt.Fprintf(w, "meshllm_router_served_total{where=\"peer\"} %g\n", c.Peer)
		fmt.Fprintf(w, "meshllm_router_forwarded_in_total{outcome=\"served\"} %g\n", c.ServedForOthers)
		fmt.Fprintf(w, "meshllm_router_forwarded_in_total{outcome=\"busy\"} 7\n")
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var body completionBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream || !body.StreamOptions.IncludeUsage || body.Model != "fake-model" {
			m.t.Errorf("bad request body (%v): %+v", err, body)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.n++
		if m.fail != nil && m.fail(m.n) {
			m.mu.Unlock()
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		server := peer
		if to, ok := m.forwardTo[peer]; ok {
			server = to
			m.counters[peer].Peer++
			m.counters[to].ServedForOthers++
		} else {
			m.counters[peer].Local++
		}
		cached := 0
		for _, p := range m.seen[server] {
			cached = max(cached, commonPrefix(p, body.Prompt))
		}
		m.seen[server] = append(m.seen[server], body.Prompt)
		m.log = append(m.log, fakeReq{entry: peer, server: server, prompt: len(body.Prompt), cached: cached, maxTokens: body.MaxTokens})
		m.mu.Unlock()

		w.Header().Set("Content-Type", "text/event-stream")
		for range body.MaxTokens {
			fmt.Fprint(w, "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"x\",\"finish_reason\":null}]}\n\n")
		}
		fmt.Fprint(w, "data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n",
			len(body.Prompt), body.MaxTokens, cached)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	return mux
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
