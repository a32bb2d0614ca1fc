package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// waitFor fails the test if ch yields nothing in a long while: a bound on a
// bug (a hang), not a timing assumption.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// doneSignal wraps h so that every finished request is announced on the
// returned channel.
func doneSignal(h http.Handler) (http.Handler, <-chan struct{}) {
	done := make(chan struct{}, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	}), done
}

func TestClientDisconnectCancelsGeneration(t *testing.T) {
	cases := []struct{ name, path, body string }{
		{"openai stream", "/v1/chat/completions", `{"model":"stories260K","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"openai", "/v1/completions", `{"model":"stories260K","prompt":"hi"}`},
		{"ollama stream", "/api/generate", `{"model":"stories260K","prompt":"hi"}`},
		{"ollama", "/api/chat", `{"model":"stories260K","stream":false,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eng := newFakeEngine()
			eng.block = true
			eng.started = make(chan struct{}, 1)
			eng.cancelled = make(chan error, 1)
			srv, err := NewServer(DefaultConfig(), eng)
			if err != nil {
				t.Fatal(err)
			}
			h, done := doneSignal(srv.Handler())
			hs := httptest.NewServer(h)
			defer hs.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+c.path, strings.NewReader(c.body))
			respc := make(chan *http.Response, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					respc <- resp
				}
			}()
			waitFor(t, eng.started, "the generation to start")
			if strings.Contains(c.name, "stream") {
				resp := waitFor(t, respc, "the stream to start")
				if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
					t.Fatalf("reading the first event: %v", err)
				}
			}
			cancel() // the client goes away
			if err := waitFor(t, eng.cancelled, "the generation to be cancelled"); !errors.Is(err, context.Canceled) {
				t.Errorf("generation ended with %v, want context.Canceled", err)
			}
			waitFor(t, done, "the handler to return")
			if got := scrape(t, srv); !strings.Contains(got, `status="499"} 1`) {
				t.Errorf("metrics do not count the disconnect:\n%s", grepLines(got, "http_requests_total"))
			}
		})
	}
}

func TestServeAndGracefulShutdown(t *testing.T) {
	eng := newFakeEngine()
	cfg := DefaultConfig()
	cfg.ShutdownTimeout = 50 * time.Millisecond
	srv, err := NewServer(cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	if status, _, body := get(t, base, "/healthz"); status != 200 || !strings.Contains(string(body), `"model":"stories260K"`) {
		t.Fatalf("healthz %d %s", status, body)
	}
	if status, _, body := get(t, base, "/"); status != 200 || !strings.Contains(string(body), "running") {
		t.Fatalf("root %d %s", status, body)
	}

	// A generation still running at shutdown is cancelled after the grace
	// period, and Serve returns.
	eng.set(func(f *fakeEngine) {
		f.block, f.started, f.cancelled = true, make(chan struct{}, 1), make(chan error, 1)
	})
	go func() {
		resp, err := http.Post(base+"/api/generate", "application/json", strings.NewReader(`{"model":"stories260K","prompt":"hi"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, eng.started, "the generation to start")
	stop()
	if err := waitFor(t, served, "Serve to return"); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := waitFor(t, eng.cancelled, "the generation to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("generation ended with %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("still serving after shutdown")
	}
}

func TestServeRefusesExposedListenerWithoutToken(t *testing.T) {
	srv, err := NewServer(DefaultConfig(), newFakeEngine())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "API token") {
		t.Errorf("Serve on %s: %v", ln.Addr(), err)
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*Config){
		"exposed":         func(c *Config) { c.ListenAddr = "0.0.0.0:11435" },
		"all interfaces":  func(c *Config) { c.ListenAddr = ":11435" },
		"body":            func(c *Config) { c.MaxBodyBytes = 0 },
		"prompt":          func(c *Config) { c.MaxPromptTokens = -1 },
		"limit":           func(c *Config) { c.MaxTokensLimit = -1 },
		"default > limit": func(c *Config) { c.MaxTokensLimit = 10; c.DefaultMaxTokens = 11 },
		"timeout":         func(c *Config) { c.RequestTimeout = -1 },
		"token":           func(c *Config) { c.APIToken = "a b" },
		"alias":           func(c *Config) { c.Aliases = map[string]string{"": "x"} },
	}
	for name, mod := range bad {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := DefaultConfig()
	c.ListenAddr, c.APIToken = "0.0.0.0:11435", "tok"
	if err := c.Validate(); err != nil {
		t.Errorf("exposed with token: %v", err)
	}
	c = DefaultConfig()
	c.Aliases = map[string]string{"gpt": "other-model"}
	if _, err := NewServer(c, newFakeEngine()); err == nil {
		t.Errorf("alias to a model not served: accepted")
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "localhost:1": true, "[::1]:1": true, "127.0.0.2:1": true,
		"0.0.0.0:1": false, ":1": false, "[::]:1": false, "192.168.1.2:1": false, "example.com:1": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
}

func TestRequestTimeout(t *testing.T) {
	eng := newFakeEngine()
	eng.block = true
	cfg := DefaultConfig()
	cfg.RequestTimeout = time.Millisecond
	srv, err := NewServer(cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	base := httptestServer(t, srv.Handler())
	status, hdr, body := post(t, base, "/v1/completions", `{"model":"stories260K","prompt":"hi"}`)
	checkError(t, errorCase{path: "/v1/", status: 504, want: "timed out", code: "timeout"}, status, hdr, body)
	// Streaming: the timeout ends the stream with an error line.
	status, _, body = post(t, base, "/api/generate", `{"model":"stories260K","prompt":"hi"}`)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if status != 200 || !strings.Contains(lines[len(lines)-1], `{"error":"request timed out`) {
		t.Errorf("stream timeout: %d, last line %q", status, lines[len(lines)-1])
	}
}

func TestConcurrentRequests(t *testing.T) {
	srv, _, base := newTestServer(t)
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"stories260K","stream":%s,"messages":[{"role":"user","content":"hi %d"}]}`,
		"/v1/completions":      `{"model":"stories260K","stream":%s,"prompt":"hi %d"}`,
		"/api/generate":        `{"model":"stories260K","stream":%s,"prompt":"hi %d"}`,
		"/api/chat":            `{"model":"stories260K","stream":%s,"messages":[{"role":"user","content":"hi %d"}]}`,
	}
	type result struct {
		path   string
		status int
		body   string
	}
	results := make(chan result, 64)
	n := 0
	for path, tmpl := range bodies {
		for i, stream := range []string{"true", "false", "true", "false"} {
			n++
			go func() {
				resp, err := http.Post(base+path, "application/json", strings.NewReader(fmt.Sprintf(tmpl, stream, i)))
				if err != nil {
					results <- result{path, 0, err.Error()}
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				results <- result{path, resp.StatusCode, string(b)}
			}()
		}
	}
	for range n {
		r := waitFor(t, results, "a response")
		if r.status != 200 {
			t.Errorf("%s: %d %s", r.path, r.status, r.body)
			continue
		}
		// Every reply, streamed or not, spells the whole story once.
		text := strings.NewReplacer(`\u003c`, "<").Replace(r.body)
		for _, w := range []string{"Once", "upon", "fox"} {
			if !strings.Contains(text, w) {
				t.Errorf("%s: reply lacks %q: %s", r.path, w, r.body)
			}
		}
	}
	if got := scrape(t, srv); !strings.Contains(got, `meshllm_engine_served_requests_total 16`) {
		t.Errorf("engine served count:\n%s", grepLines(got, "served"))
	}
}

// TestBrowserTokenCookie: a browser opens the dashboard once with
// ?token=, then its cookie authorizes GETs, never POSTs.
func TestBrowserTokenCookie(t *testing.T) {
	cfg := DefaultConfig()
	cfg.APIToken = "s3cret"
	srv, err := NewServer(cfg, newFakeEngine())
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	do := func(method, target string, cookie *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(`{}`))
		if cookie != nil {
			req.AddCookie(cookie)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do("GET", "/v1/models", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", rec.Code)
	}
	if rec := do("GET", "/v1/models?token=wrong", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", rec.Code)
	}
	rec := do("GET", "/v1/models?token=s3cret", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("query token: %d", rec.Code)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie: %+v", cookies)
	}
	if rec := do("GET", "/v1/models", cookies[0]); rec.Code != http.StatusOK {
		t.Fatalf("cookie GET: %d", rec.Code)
	}
	if rec := do("POST", "/v1/chat/completions", cookies[0]); rec.Code != http.StatusUnauthorized {
		t.Fatalf("cookie must not authorize a POST: %d", rec.Code)
	}
}
