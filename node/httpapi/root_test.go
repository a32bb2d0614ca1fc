package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAcceptsHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true,
		"TEXT/HTML":                         true,
		"application/json, text/html;q=0.5": true,
		"text/html;q=0":                     false,
		"*/*":                               false,
		"":                                  false,
		"application/json":                  false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := acceptsHTML(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}

// TestRootWithoutDashboard: a server without a dashboard answers browsers
// with the plain line too.
func TestRootWithoutDashboard(t *testing.T) {
	_, _, url := newTestServer(t)
	status, hdr, body := get(t, url, "/", "Accept", "text/html")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(string(body), "meshllm is running") {
		t.Fatalf("%d %q %s", status, hdr.Get("Content-Type"), body)
	}
}
