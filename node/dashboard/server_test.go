package dashboard

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/prometheus/client_golang/prometheus"
)

// TestDashboardOnServer mounts the dashboard on the API: browsers get the
// page at / and /ui/, API clients keep the plain line at /, and the
// page's assets, state and events are behind the API token.
func TestDashboardOnServer(t *testing.T) {
	a, _ := forwardingPair(t, prompt(7, 256))
	reg := prometheus.NewRegistry()
	d, err := New(Config{Router: a.router, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.DefaultConfig()
	cfg.APIToken = "secret"
	srv, err := httpapi.NewServer(cfg, a.router, httpapi.WithRegistry(reg), httpapi.WithDashboard(d.Handler()))
	if err != nil {
		t.Fatal(err)
	}
	url := httptestServer(t, srv.Handler())
	auth := []string{"Authorization", "Bearer secret"}
	browser := append([]string{"Accept", "text/html,application/xhtml+xml,*/*;q=0.8"}, auth...)

	status, hdr, body := get(t, url, "/", browser...)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "meshllm dashboard") {
		t.Fatalf("browser at /: %d %q %.80s", status, hdr.Get("Content-Type"), body)
	}
	if hdr.Get("Content-Security-Policy") == "" {
		t.Error("the page has no Content-Security-Policy")
	}
	status, _, body = get(t, url, "/", auth...)
	if status != 200 || !strings.Contains(string(body), "meshllm is running") {
		t.Fatalf("API client at /: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodHead, url+"/", nil)
	req.Header.Set("Authorization", "Bearer secret")
	if status, hdr, body := do(t, req); status != 200 || len(body) != 0 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("HEAD /: %d %q %q", status, hdr.Get("Content-Type"), body)
	}
	for path, ctype := range map[string]string{
		"/ui/": "text/html", "/ui/app.js": "text/javascript", "/ui/style.css": "text/css", "/ui/state": "application/json",
	} {
		status, hdr, body := get(t, url, path, auth...)
		if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("%s: %d %q (%d bytes)", path, status, hdr.Get("Content-Type"), len(body))
		}
	}
	if status, _, _ := get(t, url, "/ui/nope.js", auth...); status != 404 {
		t.Errorf("missing asset: %d", status)
	}
	if status, _, _ := get(t, url, "/ui/", "Accept", "text/html"); status != 401 {
		t.Errorf("the page without the token: %d, want 401", status)
	}
	if status, _, _ := get(t, url, "/ui/events"); status != 401 {
		t.Errorf("events without the token: %d, want 401", status)
	}

	// A request through the API shows up with its TTFT.
	status, _, body = post(t, url, "/v1/completions", `{"model":"tiny","prompt":"hello there","max_tokens":2}`, auth...)
	if status != 200 {
		t.Fatalf("completion: %d %s", status, body)
	}
	d.Step()
	s := d.Snapshot()
	if len(s.Samples) != 1 || s.Samples[0].Requests != 1 || s.Samples[0].TTFTMillis == nil || *s.Samples[0].TTFTMillis <= 0 {
		t.Fatalf("sample after an API request: %+v", s.Samples)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

func get(t *testing.T, url, path string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

func post(t *testing.T, url, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}
