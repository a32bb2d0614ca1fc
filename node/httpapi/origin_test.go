package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
)

// originServer is a test Server with a dashboard-like handler at /ui/ and
// a /v1/mesh route, as cmd/meshllm mounts them; the returned counter tells
// how many generations the engine started.
func originServer(t *testing.T, mod ...func(*Config)) (*fakeEngine, string) {
	t.Helper()
	eng := newFakeEngine()
	cfg := DefaultConfig()
	for _, m := range mod {
		m(&cfg)
	}
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"secret":"hunter2"}`)
	})
	srv, err := NewServer(cfg, eng, WithDashboard(page), WithRoute("GET /v1/mesh", page))
	if err != nil {
		t.Fatal(err)
	}
	return eng, httptestServer(t, srv.Handler())
}

// send makes one request with an explicit Host (empty: the URL's) and
// headers given as name, value pairs.
func send(t *testing.T, method, url, host, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (f *fakeEngine) generations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// noCORS fails when any Access-Control-* header is present.
func noCORS(t *testing.T, what string, h http.Header) {
	t.Helper()
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("%s: carries %s: %q", what, k, h.Get(k))
		}
	}
}

// wantOpenAIError and wantOllamaError check the error shapes.
func wantOpenAIError(t *testing.T, what string, b []byte) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("%s: not an OpenAI error: %s", what, b)
	}
}

func wantOllamaError(t *testing.T, what string, b []byte) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Errorf("%s: not an Ollama error: %s", what, b)
	}
}

func wantShape(t *testing.T, what, path string, b []byte) {
	t.Helper()
	if strings.HasPrefix(path, "/v1/") {
		wantOpenAIError(t, what, b)
	} else {
		wantOllamaError(t, what, b)
	}
}

func TestHostForeignRefused(t *testing.T) {
	eng, url := originServer(t)
	for _, path := range []string{"/api/tags", "/v1/models", "/ui/state", "/v1/mesh", "/healthz", "/api/version"} {
		for _, host := range []string{"evil.example", "evil.example:11435", "127.0.0.1.evil.example", "localhost.evil.example", "192.168.1.10:11435"} {
			resp, b := send(t, "GET", url+path, host, "")
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s with Host %s: %d, want 403: %s", path, host, resp.StatusCode, b)
				continue
			}
			wantShape(t, "GET "+path+" Host "+host, path, b)
			noCORS(t, "GET "+path+" Host "+host, resp.Header)
			if strings.Contains(string(b), "hunter2") {
				t.Errorf("GET %s with Host %s leaked the page: %s", path, host, b)
			}
		}
	}
	resp, b := send(t, "POST", url+"/api/generate", "evil.example", `{"model":"stories260K","prompt":"hi","stream":false}`,
		"Content-Type", "application/json")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /api/generate with Host evil.example: %d %s", resp.StatusCode, b)
	}
	if n := eng.generations(); n != 0 {
		t.Errorf("the engine generated %d times for foreign Hosts", n)
	}
}

// TestHostDNSRebinding is the rebinding attack: a page on evil.example
// whose name now resolves to 127.0.0.1 reads /ui/state from its own origin.
func TestHostDNSRebinding(t *testing.T) {
	_, url := originServer(t)
	resp, b := send(t, "GET", url+"/ui/state", "evil.example:11435", "", "Origin", "http://evil.example:11435")
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), "hunter2") {
		t.Fatalf("rebinding GET /ui/state: %d %s", resp.StatusCode, b)
	}
	noCORS(t, "rebinding", resp.Header)
	resp, b = send(t, "GET", url+"/v1/mesh?recent=1", "evil.example:11435", "")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebinding GET /v1/mesh: %d %s", resp.StatusCode, b)
	}
	wantOpenAIError(t, "rebinding /v1/mesh", b)
}

func TestHostLoopbackNamesServed(t *testing.T) {
	_, url := originServer(t)
	for _, host := range []string{"", "localhost", "localhost:11435", "LOCALHOST:1", "app.localhost:8080", "127.0.0.1", "127.0.0.5:9",
		"[::1]", "[::1]:11435", "0.0.0.0:11435", "localhost."} {
		resp, b := send(t, "GET", url+"/api/tags", host, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /api/tags with Host %q: %d %s", host, resp.StatusCode, b)
		}
	}
}

// TestOriginSimplePOSTRefused is the cross-site "simple" request a browser
// sends without a preflight: it must be refused before the body is read.
func TestOriginSimplePOSTRefused(t *testing.T) {
	eng, url := originServer(t)
	for _, path := range []string{"/api/generate", "/api/chat", "/v1/chat/completions", "/v1/completions"} {
		body := `{"model":"stories260K","prompt":"hi","messages":[{"role":"user","content":"hi"}],"stream":false}`
		resp, b := send(t, "POST", url+path, "", body, "Content-Type", "text/plain", "Origin", "http://evil.example")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site text/plain POST %s: %d, want 403: %s", path, resp.StatusCode, b)
			continue
		}
		wantShape(t, "POST "+path, path, b)
		noCORS(t, "POST "+path, resp.Header)
	}
	if n := eng.generations(); n != 0 {
		t.Errorf("the engine generated %d times for cross-site POSTs", n)
	}
	for _, origin := range []string{"null", "http://evil.example", "https://localhost.evil.example", "http://127.0.0.1.evil.example:80",
		"chrome-extension://abc", "http://app.localhost:3000", "http://localhost:3000@evil.example"} {
		resp, b := send(t, "GET", url+"/api/tags", "", "", "Origin", origin)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET /api/tags from %s: %d, want 403: %s", origin, resp.StatusCode, b)
		}
		noCORS(t, "GET from "+origin, resp.Header)
	}
}

func TestPreflightAllowedOrigin(t *testing.T) {
	_, url := originServer(t)
	for _, origin := range []string{"http://localhost:3000", "https://127.0.0.1", "http://[::1]:5173", "tauri://localhost", "vscode-webview://x1y2"} {
		resp, b := send(t, "OPTIONS", url+"/v1/chat/completions", "", "",
			"Origin", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization,content-type,x-stainless-os,x-stainless-read-timeout")
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("preflight from %s: %d, want 204: %s", origin, resp.StatusCode, b)
			continue
		}
		h := resp.Header
		if got := h.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("preflight from %s: Allow-Origin %q", origin, got)
		}
		if m := h.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") || !strings.Contains(m, "GET") {
			t.Errorf("preflight from %s: Allow-Methods %q", origin, m)
		}
		allow := strings.ToLower(h.Get("Access-Control-Allow-Headers"))
		for _, want := range []string{"authorization", "content-type", "x-stainless-os", "x-stainless-read-timeout"} {
			if !strings.Contains(allow, want) {
				t.Errorf("preflight from %s: Allow-Headers %q lacks %s", origin, allow, want)
			}
		}
		if h.Get("Access-Control-Max-Age") == "" {
			t.Errorf("preflight from %s: no Max-Age", origin)
		}
		if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
			t.Errorf("preflight from %s: Vary %q", origin, h.Values("Vary"))
		}
	}
	// Any API path, Ollama's included.
	resp, b := send(t, "OPTIONS", url+"/api/chat", "", "", "Origin", "http://localhost:8080", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8080" {
		t.Errorf("preflight /api/chat: %d %q %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
}

func TestPreflightDisallowedOrigin(t *testing.T) {
	_, url := originServer(t)
	resp, b := send(t, "OPTIONS", url+"/v1/chat/completions", "", "",
		"Origin", "http://evil.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight from evil.example: %d %s", resp.StatusCode, b)
	}
	noCORS(t, "preflight from evil.example", resp.Header)
	// The dashboard and the mesh view are same-origin only, even for an
	// origin the API allows.
	for _, path := range []string{"/ui/state", "/v1/mesh", "/metrics", "/"} {
		resp, b := send(t, "OPTIONS", url+path, "", "", "Origin", "http://localhost:3000", "Access-Control-Request-Method", "GET")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("preflight %s from an allowed origin: %d, want 403: %s", path, resp.StatusCode, b)
		}
		noCORS(t, "preflight "+path, resp.Header)
	}
}

// TestCORSSameOriginOnly checks that the dashboard's and the mesh's
// endpoints answer their own origin and nothing else.
func TestCORSSameOriginOnly(t *testing.T) {
	_, url := originServer(t)
	host := strings.TrimPrefix(url, "http://")
	for _, path := range []string{"/ui/state", "/v1/mesh", "/metrics"} {
		resp, b := send(t, "GET", url+path, "", "", "Origin", "http://localhost:3000")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s from another (allowed) origin: %d, want 403: %s", path, resp.StatusCode, b)
		}
		noCORS(t, "GET "+path, resp.Header)
		resp, b = send(t, "GET", url+path, "", "", "Origin", "http://"+host)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s from its own origin: %d %s", path, resp.StatusCode, b)
		}
		noCORS(t, "same-origin GET "+path, resp.Header)
		resp, _ = send(t, "GET", url+path, "", "", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site no-cors GET %s: %d, want 403", path, resp.StatusCode)
		}
	}
	// A link from another site still opens the dashboard.
	resp, b := send(t, "GET", url+"/", "", "", "Accept", "text/html", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "hunter2") {
		t.Errorf("navigating to / from another site: %d %s", resp.StatusCode, b)
	}
}

func TestCORSAllowedOriginAnswers(t *testing.T) {
	_, url := originServer(t)
	resp, b := send(t, "GET", url+"/api/tags", "", "", "Origin", "http://localhost:3000")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Fatalf("GET /api/tags from localhost:3000: %d %q %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
	if !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
		t.Errorf("no Vary: Origin: %q", resp.Header.Values("Vary"))
	}
	if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("credentials allowed: %q", resp.Header.Get("Access-Control-Allow-Credentials"))
	}
}

// TestCORSAuthErrorReadable: with a token set, the 401 an allowed origin
// gets carries CORS headers, so the app can show why.
func TestCORSAuthErrorReadable(t *testing.T) {
	_, url := originServer(t, func(c *Config) { c.APIToken = "s3cret" })
	resp, b := send(t, "GET", url+"/v1/models", "", "", "Origin", "http://localhost:3000")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Fatalf("unauthorized GET from an allowed origin: %d %q %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
	resp, b = send(t, "OPTIONS", url+"/v1/models", "", "", "Origin", "http://localhost:3000", "Access-Control-Request-Method", "GET",
		"Access-Control-Request-Headers", "authorization")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight needs no token: %d %s", resp.StatusCode, b)
	}
	resp, b = send(t, "GET", url+"/v1/models", "", "", "Origin", "http://localhost:3000", "Authorization", "Bearer s3cret")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("authorized GET from an allowed origin: %d %s", resp.StatusCode, b)
	}
}

func TestCORSStreamingCarriesOrigin(t *testing.T) {
	_, url := originServer(t)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"stories260K","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"},
		{"/api/generate", `{"model":"stories260K","prompt":"hi"}`, `"done":true`},
	} {
		req, err := http.NewRequest("POST", url+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://localhost:3000")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != http.StatusOK || got != "http://localhost:3000" {
			t.Errorf("streamed %s: %d, Allow-Origin %q", tc.path, resp.StatusCode, got)
		}
		var all strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
		}
		resp.Body.Close()
		if !strings.Contains(all.String(), tc.want) {
			t.Errorf("streamed %s did not finish: %s", tc.path, all.String())
		}
	}
}

func TestOriginConfiguredExtension(t *testing.T) {
	const ext = "chrome-extension://abcdefghijklmnopabcdefghijklmnop"
	_, url := originServer(t)
	if resp, _ := send(t, "GET", url+"/api/tags", "", "", "Origin", ext); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an extension by default: %d, want 403", resp.StatusCode)
	}
	_, url = originServer(t, func(c *Config) { c.AllowedOrigins = []string{ext, "https://*.example.com"} })
	for _, origin := range []string{ext, "https://chat.example.com"} {
		resp, b := send(t, "OPTIONS", url+"/api/chat", "", "", "Origin", origin, "Access-Control-Request-Method", "POST")
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("configured %s preflight: %d %q %s", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
		}
	}
	for _, origin := range []string{"chrome-extension://other", "https://example.com", "http://chat.example.com"} {
		if resp, _ := send(t, "GET", url+"/api/tags", "", "", "Origin", origin); resp.StatusCode != http.StatusForbidden {
			t.Errorf("unconfigured %s: %d, want 403", origin, resp.StatusCode)
		}
	}
	// The defaults stay.
	if resp, _ := send(t, "GET", url+"/api/tags", "", "", "Origin", "http://localhost:3000"); resp.StatusCode != http.StatusOK {
		t.Errorf("localhost:3000 with extra origins configured: %d", resp.StatusCode)
	}
}

func TestOriginAnyStillGuardsTheDashboard(t *testing.T) {
	_, url := originServer(t, func(c *Config) { c.AllowedOrigins = []string{"*"} })
	resp, _ := send(t, "GET", url+"/api/tags", "", "", "Origin", "https://anything.example")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://anything.example" {
		t.Errorf(`"*": %d %q`, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp, _ := send(t, "GET", url+"/ui/state", "", "", "Origin", "https://anything.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf(`"*" opened /ui/state to other origins: %d`, resp.StatusCode)
	}
	if resp, _ := send(t, "GET", url+"/api/tags", "", "", "Origin", "http://x/../evil"); resp.StatusCode != http.StatusForbidden {
		t.Errorf(`"*" let a malformed origin in: %d`, resp.StatusCode)
	}
}

// serveOn runs a Server on ln until the test ends, and returns its base URL.
func serveOn(t *testing.T, cfg Config, ln net.Listener) (*fakeEngine, string) {
	t.Helper()
	eng := newFakeEngine()
	srv, err := NewServer(cfg, eng, WithRoute("GET /v1/mesh", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "{}")
	})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return eng, "http://127.0.0.1:" + port
}

// TestHostServeLoopback: Serve on a loopback listener checks Host; an
// HTTP/1.0 request without one is refused too.
func TestHostServeLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, url := serveOn(t, DefaultConfig(), ln)
	if resp, b := send(t, "GET", url+"/api/tags", "evil.example", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("Serve on loopback, Host evil.example: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url+"/api/tags", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("Serve on loopback, Host 127.0.0.1: %d %s", resp.StatusCode, b)
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /api/tags HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("HTTP/1.0 without Host: %d %s", resp.StatusCode, b)
	}
	wantOllamaError(t, "HTTP/1.0 without Host", b)
}

// TestHostServeExposed: on a listener other machines reach, the operator
// chose to be reached by other names: the Host check is off, the token is
// required and the Origin check stays.
func TestHostServeExposed(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot listen on every interface, and CI=true: %v", err)
		}
		t.Skipf("cannot listen on every interface here: %v", err)
	}
	cfg := DefaultConfig()
	cfg.ListenAddr = ""
	srv, err := NewServer(cfg, newFakeEngine())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "API token") {
		t.Fatalf("Serve on 0.0.0.0 without a token: %v", err)
	}
	if ln, err = net.Listen("tcp", "0.0.0.0:0"); err != nil {
		t.Fatal(err)
	}
	cfg.APIToken = "s3cret"
	eng, url := serveOn(t, cfg, ln)
	auth := []string{"Authorization", "Bearer s3cret"}
	if resp, b := send(t, "GET", url+"/api/tags", "llm.lan:11435", "", auth...); resp.StatusCode != http.StatusOK {
		t.Errorf("exposed, Host llm.lan with the token: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url+"/api/tags", "llm.lan:11435", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("exposed, Host llm.lan without the token: %d %s", resp.StatusCode, b)
	}
	body := `{"model":"stories260K","prompt":"hi","stream":false}`
	resp, b := send(t, "POST", url+"/api/generate", "llm.lan:11435", body, append(auth, "Content-Type", "text/plain", "Origin", "http://evil.example")...)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("exposed, cross-site POST with the token: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url+"/v1/mesh", "llm.lan:11435", "", append(auth, "Origin", "http://localhost:3000")...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("exposed, cross-origin /v1/mesh: %d %s", resp.StatusCode, b)
	}
	if resp, b := send(t, "GET", url+"/v1/mesh", "llm.lan:11435", "", append(auth, "Origin", "http://llm.lan:11435")...); resp.StatusCode != http.StatusOK {
		t.Errorf("exposed, same-origin /v1/mesh: %d %s", resp.StatusCode, b)
	}
	if n := eng.generations(); n != 0 {
		t.Errorf("generated %d times", n)
	}
}

func TestHostMatcher(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:11435": true, "LocalHost:1": true, "localhost.": true, "localhost.:80": true,
		"app.localhost": true, "a.b.localhost:3000": true, "127.0.0.1": true, "127.0.0.1:11435": true, "127.1.2.3:9": true,
		"[::1]": true, "[::1]:11435": true, "::1": true, "[::ffff:127.0.0.1]:80": true, "0.0.0.0:11435": true, "[::]:1": true,

		"": false, ":11435": false, "evil.example": false, "evil.example:11435": false, "localhost.evil.example": false,
		"127.0.0.1.evil.example": false, "evillocalhost": false, "192.168.1.10": false, "10.0.0.1:11435": false,
		"[fe80::1%25eth0]:80": false, "[::2]": false, "8.8.8.8": false, "local": false, "localhost..": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestOriginMatcher(t *testing.T) {
	def, err := newOriginMatcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := newOriginMatcher([]string{"chrome-extension://abc", "https://*.example.com", "http://192.168.1.5:*", "HTTP://Mixed.Case:8080/", "null"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin     string
		def, extra bool
	}{
		{"http://localhost", true, true},
		{"http://localhost:3000", true, true},
		{"https://localhost:8443", true, true},
		{"HTTP://LOCALHOST:3000", true, true},
		{"http://127.0.0.1:5173", true, true},
		{"http://0.0.0.0:8080", true, true},
		{"http://[::1]:3000", true, true},
		{"https://[::1]", true, true},
		{"app://-", true, true},
		{"file://", true, true},
		{"tauri://localhost", true, true},
		{"vscode-webview://1abc", true, true},
		{"vscode-file://vscode-app", true, true},
		{"chrome-extension://abc", false, true},
		{"chrome-extension://abcd", false, false},
		{"https://chat.example.com", false, true},
		{"https://a.b.example.com:8443", false, false}, // the * stands before ".example.com", the port after it
		{"https://example.com", false, false},
		{"https://evil.com.example.com.evil", false, false},
		{"http://192.168.1.5:3000", false, true},
		{"http://192.168.1.50:3000", false, false},
		{"http://mixed.case:8080", false, true},
		{"null", false, true},
		{"http://evil.example", false, false},
		{"http://localhost.evil.example", false, false},
		{"http://localhost:3000.evil.example", false, false},
		{"http://localhost:3000@evil.example", false, false},
		{"http://localhost:3000/path", false, false},
		{"http://localhost:99999", false, false},
		{"http://localhost:", false, false},
		{"http://localhost:+80", false, false},
		{"http://app.localhost:3000", false, false},
		{"http://127.0.0.2:3000", false, false},
		{"", false, false},
		{"localhost", false, false},
		{"ws://localhost:3000", false, false},
		{"http://[::1", false, false},
		{"http://[::1]x", false, false},
	} {
		if got := def.allows(tc.origin); got != tc.def {
			t.Errorf("default allows(%q) = %v, want %v", tc.origin, got, tc.def)
		}
		if got := extra.allows(tc.origin); got != tc.extra {
			t.Errorf("extended allows(%q) = %v, want %v", tc.origin, got, tc.extra)
		}
	}
}

func TestOriginPatternsValidated(t *testing.T) {
	for _, good := range []string{"*", "null", "http://localhost:3000", "https://*.example.com", "chrome-extension://abc", "moz-extension://*",
		"http://[::1]:*", "http://10.0.0.2:8080/", " https://x.y "} {
		cfg := DefaultConfig()
		cfg.AllowedOrigins = []string{good}
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "localhost:3000", "http://", "*://localhost", "http://a.com/path", "http://*.*.com", "http://user@host",
		"http://a, http://b", "1http://x", "http://localhost:port", "https://" + strings.Repeat("a", 600)} {
		cfg := DefaultConfig()
		cfg.AllowedOrigins = []string{bad}
		err := cfg.Validate()
		if err == nil {
			t.Errorf("Validate(%q) accepted it", bad)
			continue
		}
		if _, nerr := NewServer(cfg, newFakeEngine()); nerr == nil {
			t.Errorf("NewServer accepted allowed origin %q", bad)
		}
	}
	cfg := DefaultConfig()
	cfg.AllowedOrigins = make([]string, MaxAllowedOrigins+1)
	for i := range cfg.AllowedOrigins {
		cfg.AllowedOrigins[i] = "http://localhost:3000"
	}
	if err := cfg.Validate(); err == nil {
		t.Error("Validate accepted more than MaxAllowedOrigins entries")
	}
}

func TestCORSAllowHeaders(t *testing.T) {
	got := strings.ToLower(allowHeaders("Content-Type, x-stainless-new-thing, X-Evil, x-stainless-os, x-stainless-bad\"name"))
	for _, want := range []string{"authorization", "content-type", "x-stainless-os", "x-stainless-new-thing", "openai-beta"} {
		if !strings.Contains(got, want) {
			t.Errorf("allowHeaders lacks %s: %s", want, got)
		}
	}
	for _, not := range []string{"x-evil", "bad"} {
		if strings.Contains(got, not) {
			t.Errorf("allowHeaders let %s through: %s", not, got)
		}
	}
	if n := strings.Count(got, "x-stainless-os"); n != 1 {
		t.Errorf("x-stainless-os listed %d times", n)
	}
	many := strings.Repeat("x-stainless-a,", 10*maxRequestedHeaders)
	if n := strings.Count(allowHeaders(many), ","); n > strings.Count(corsAllowHeaders, ",")+maxRequestedHeaders {
		t.Errorf("allowHeaders reflected %d names", n)
	}
}

// FuzzOriginMatcher checks the matcher's promises on arbitrary origins and
// allowlist entries: a malformed origin is never allowed, an exact entry
// allows exactly itself, a wildcard entry only what starts and ends as it
// does, and the default list only loopback hosts and app schemes.
func FuzzOriginMatcher(f *testing.F) {
	for _, s := range [][2]string{
		{"http://localhost:3000", "http://localhost:*"}, {"https://a.example.com", "https://*.example.com"},
		{"chrome-extension://abc", "chrome-extension://abc"}, {"null", "null"}, {"http://[::1]:80", "*"},
		{"http://localhost:3000@evil", "http://localhost:*"}, {"file://", "file://*"},
	} {
		f.Add(s[0], s[1])
	}
	def, err := newOriginMatcher(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, origin, entry string) {
		_, wellFormed := parseOrigin(origin)
		if def.allows(origin) {
			if !wellFormed {
				t.Fatalf("default allows malformed %q", origin)
			}
			o := strings.ToLower(origin)
			scheme, rest, _ := strings.Cut(o, "://")
			host := rest
			if h, _, err := net.SplitHostPort(rest); err == nil {
				host = h
			}
			switch scheme {
			case "http", "https":
				if host != "localhost" && host != "127.0.0.1" && host != "0.0.0.0" && host != "::1" && host != "[::1]" {
					t.Fatalf("default allows %q", origin)
				}
			case "app", "file", "tauri", "vscode-webview", "vscode-file":
			default:
				t.Fatalf("default allows scheme of %q", origin)
			}
		}
		p, err := parseOriginPattern(entry)
		if err != nil {
			return
		}
		m, err := newOriginMatcher([]string{entry})
		if err != nil {
			t.Fatalf("Validate accepted %q but the matcher did not: %v", entry, err)
		}
		got := m.allows(origin)
		if got && !wellFormed {
			t.Fatalf("entry %q allows malformed %q", entry, origin)
		}
		if !got || def.allows(origin) {
			return
		}
		o := strings.ToLower(origin)
		switch {
		case p.star && p.prefix == "" && p.suffix == "":
		case p.star:
			if !strings.HasPrefix(o, p.prefix) || !strings.HasSuffix(o, p.suffix) {
				t.Fatalf("entry %q allows %q", entry, origin)
			}
		default:
			if o != p.prefix {
				t.Fatalf("exact entry %q allows %q", entry, origin)
			}
		}
	})
}
