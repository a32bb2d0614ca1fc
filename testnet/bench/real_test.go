package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/testnet/real"
	"github.com/meshllm/meshllm/testnet/workload"
)

// fakePeer is a stand-in OpenAI peer for RunReal: it serves every request
// locally, reports the prompt's first 32 tokens as cached after the first
// time it sees them, and checks the tokens fit the vocabulary it declares.
type fakePeer struct {
	t     *testing.T
	vocab int
	ctx   int

	mu     sync.Mutex
	served int
	seen   map[string]bool
}

func (f *fakePeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"data":[{"id":"tiny"}]}`)
	case "/api/show":
		fmt.Fprintf(w, `{"model_info":{"meshllm.vocab_size":%d,"meshllm.context_length":%d}}`, f.vocab, f.ctx)
	case "/metrics":
		f.mu.Lock()
		fmt.Fprintf(w, "meshllm_router_served_total{where=\"local\"} %d\n", f.served)
		f.mu.Unlock()
	case "/v1/completions":
		var body struct {
			Prompt []int32 `json:"prompt"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		for _, tok := range body.Prompt {
			if tok < 0 || int(tok) >= f.vocab {
				f.t.Errorf("token %d outside the %d-token vocabulary", tok, f.vocab)
			}
		}
		key := fmt.Sprint(body.Prompt[:min(32, len(body.Prompt))])
		f.mu.Lock()
		cached := 0
		if f.seen[key] {
			cached = 32
		}
		f.seen[key] = true
		f.served++
		f.mu.Unlock()
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\ndata: [DONE]\n\n", len(body.Prompt), cached)
	default:
		http.NotFound(w, r)
	}
}

// TestRunRealRows drives two fake peers with a two-skew grid and checks
// the rows: one per skew, policy meshllm-real, every request measured,
// prompts tokenized within the served model's vocabulary.
func TestRunRealRows(t *testing.T) {
	var urls []string
	for range 2 {
		srv := httptest.NewServer(&fakePeer{t: t, vocab: 300, ctx: 4096, seen: map[string]bool{}})
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	o, err := Scenario("shared-prefix")
	if err != nil {
		t.Fatal(err)
	}
	o.Requests, o.Rate, o.Clients = 24, 0, 3
	o.Skews = []workload.Skew{workload.Uniform, {Zipf: true, S: 1.1}}
	rep, err := RunReal(context.Background(), o, real.Config{Targets: urls})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	for i, r := range rep.Rows {
		if r.Policy != RealPolicy || r.Peers != 2 || r.Requests != 24 || r.Skew != o.Skews[i].String() || r.Profile != "tiny" {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.HitRate <= 0 || r.RequestHitRate <= 0 || r.MeanLatency <= 0 || r.Forwarded != 0 || r.MaxShare < 0.5 {
			t.Errorf("row %d metrics: hit %g/%g latency %g fwd %g share %g", i, r.HitRate, r.RequestHitRate, r.MeanLatency, r.Forwarded, r.MaxShare)
		}
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil || !strings.Contains(b.String(), RealPolicy) {
		t.Errorf("table (%v):\n%s", err, b.String())
	}
}

// TestRunRealChecksContext refuses a workload whose prompts do not fit the
// served context before sending anything.
func TestRunRealChecksContext(t *testing.T) {
	f := &fakePeer{t: t, vocab: 300, ctx: 256, seen: map[string]bool{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	o, _ := Scenario("shared-prefix") // 1024-token system prompts
	o.Requests = 4
	_, err := RunReal(context.Background(), o, real.Config{Targets: []string{srv.URL}})
	if err == nil || !strings.Contains(err.Error(), "--ctx") {
		t.Fatalf("err %v", err)
	}
	if f.served != 0 {
		t.Errorf("%d requests sent", f.served)
	}
}

func TestShareWindow(t *testing.T) {
	open := &workload.Workload{Sessions: []workload.Session{{Start: 10 * time.Second}, {Start: 200 * time.Second}}}
	if got := shareWindow(open); got != 10*time.Second {
		t.Errorf("open loop over 200 s: window %s, want 10s", got)
	}
	short := &workload.Workload{Sessions: []workload.Session{{Start: 3 * time.Second}}}
	if got := shareWindow(short); got != time.Second {
		t.Errorf("3 s span: window %s, want the 1 s floor", got)
	}
	if got := shareWindow(&workload.Workload{Clients: 2, Sessions: []workload.Session{{}}}); got != 5*time.Second {
		t.Errorf("closed loop: window %s", got)
	}
}
