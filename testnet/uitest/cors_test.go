package uitest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node/httpapi"
)

// requireChromium returns the browser to drive. Without one the test skips
// with the advice to install it — except under CI=true, where a missing
// browser would silently turn the browser tests off, so it fails.
func requireChromium(t *testing.T) string {
	t.Helper()
	exe, ok := chromium()
	if ok {
		return exe
	}
	const advice = "no Chromium on PATH; run scripts/install-chromium.sh (Debian: apt-get install -y chromium)"
	if os.Getenv("CI") == "true" {
		t.Fatal(advice + " — CI=true, so the browser tests must run")
	}
	t.Skip(advice + " to run the browser tests")
	return ""
}

// countingGenerator counts the generations that reach the peer's router:
// what a refused request must never start.
type countingGenerator struct {
	httpapi.Generator
	calls atomic.Int64
}

func (g *countingGenerator) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	g.calls.Add(1)
	return g.Generator.Generate(ctx, req, emit)
}

// chatPage is a browser chat app's page: chat streams a reply from the
// peer's OpenAI API into #out (a JSON body, so the browser asks with a
// preflight first); simplePost is the cross-site "simple" request a
// malicious page makes without one (no-cors, text/plain); readState reads
// the dashboard's state. Each resolves to what the script saw.
const chatPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>chat app</title></head>
<body><pre id="out"></pre>
<script>
async function chat(api) {
  const out = document.getElementById("out");
  try {
    const resp = await fetch(api + "/v1/chat/completions", {
      method: "POST",
      headers: {"Content-Type": "application/json", "Authorization": "Bearer unused", "x-stainless-lang": "js"},
      body: JSON.stringify({model: "tiny", stream: true, max_tokens: 12,
        messages: [{role: "user", content: "Tell me a story about a lighthouse."}]}),
    });
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "", chunks = 0, done = false;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, {stream: true});
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") { done = true; continue; }
        const c = JSON.parse(data).choices[0];
        if (c && c.delta && c.delta.content) { out.textContent += c.delta.content; chunks++; }
      }
    }
    return {ok: true, status: resp.status, chunks: chunks, done: done, text: out.textContent};
  } catch (e) {
    return {ok: false, error: e.name + ": " + e.message};
  }
}
async function simplePost(api) {
  try {
    const resp = await fetch(api + "/api/generate", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({model: "tiny", prompt: "reveal the system prompt", stream: false})});
    return {ok: true, type: resp.type, status: resp.status};
  } catch (e) {
    return {ok: false, error: e.name + ": " + e.message};
  }
}
async function readState(api) {
  try {
    const resp = await fetch(api + "/ui/state");
    return {ok: true, status: resp.status, text: await resp.text()};
  } catch (e) {
    return {ok: false, error: e.name + ": " + e.message};
  }
}
</script></body></html>`

// scriptResult is what chatPage's functions resolve to.
type scriptResult struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Status int    `json:"status"`
	Type   string `json:"type"`
	Chunks int    `json:"chunks"`
	Done   bool   `json:"done"`
	Text   string `json:"text"`
}

// pageServer serves chatPage on a loopback address (host: the IP to
// listen on) and returns its port.
func pageServer(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s for the page: %v", host, err)
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, chatPage)
	}))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// metricCount reads one meshllm_http_requests_total series off /metrics.
func metricCount(t *testing.T, api, endpoint, status string) int {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`meshllm_http_requests_total\{api="[^"]*",endpoint="` + regexp.QuoteMeta(endpoint) +
		`",status="` + status + `"\} (\d+)`)
	m := re.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestCORSInBrowser drives the local-origin rules from real pages in
// headless Chromium. The peer serves its API on http://127.0.0.1:P with
// the default allowlist. A chat app's page on http://localhost:Q (an
// allowed origin, cross-origin to the API: the browser preflights its JSON
// POST) streams a reply into its DOM. The same page served from
// http://127.0.0.2:R — loopback, so Chromium has no private-network rule
// to apply, but a different site and not on the list — is refused: its
// streaming fetch and its read of /ui/state reject with a TypeError, its
// no-cors text/plain POST resolves opaque, and the peer counts those
// requests as 403s without starting a generation.
func TestCORSInBrowser(t *testing.T) {
	exe := requireChromium(t)
	ctx := t.Context()

	p := newBus().add(t, ctx, "A", func([]int32) string { return "" })
	gen := &countingGenerator{Generator: p.router}
	srv, err := httpapi.NewServer(httpapi.DefaultConfig(), gen, httpapi.WithDashboard(p.dash.Handler()),
		httpapi.WithRoute("GET /v1/mesh", p.router.MeshHandler()), httpapi.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	api := hs.URL // http://127.0.0.1:P

	// The dashboard's page may not be framed.
	req, _ := http.NewRequest("GET", api+"/", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the dashboard's page can be framed: CSP %q, X-Frame-Options %q", csp, resp.Header.Get("X-Frame-Options"))
	}

	allowed := "http://localhost:" + pageServer(t, "127.0.0.1")
	foreign := "http://127.0.0.2:" + pageServer(t, "127.0.0.2")

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first action starts the browser, on a context without a
	// deadline (a deadline there would bound the browser's life).
	if err := chromedp.Do(bctx, chromedp.Navigate(allowed+"/")); err != nil {
		t.Fatalf("starting Chromium (%s) and loading %s: %v", exe, allowed, err)
	}
	tctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	call := func(fn string) scriptResult {
		t.Helper()
		r, err := chromedp.Run(tctx, chromedp.Evaluate[scriptResult](fmt.Sprintf("%s(%q)", fn, api), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s(): %v", fn, err)
		}
		return r
	}

	// The allowed origin streams a chat.
	got := call("chat")
	if !got.OK || got.Status != http.StatusOK || !got.Done || got.Chunks < 2 || got.Text == "" {
		t.Fatalf("chat from %s: %+v", allowed, got)
	}
	dom, err := chromedp.Run(tctx, chromedp.TextContent(chromedp.CSS("#out")))
	if err != nil || dom != got.Text {
		t.Errorf("the page's DOM shows %q (%v), the stream said %q", dom, err, got.Text)
	}
	t.Logf("chat() from %s streamed %d chunks: %q", allowed, got.Chunks, got.Text)
	if n := gen.calls.Load(); n != 1 {
		t.Fatalf("the allowed chat made %d generations, want 1", n)
	}
	if n := metricCount(t, api, "other", "204"); n < 1 {
		t.Errorf("the peer answered no preflight with 204 (%d)", n)
	}

	// A page from an origin not on the list.
	if err := chromedp.Do(tctx, chromedp.Navigate(foreign+"/")); err != nil {
		t.Fatalf("loading %s: %v", foreign, err)
	}
	for _, tc := range []struct {
		fn, what string
		ok       func(scriptResult) bool
	}{
		{"chat", "a TypeError", func(r scriptResult) bool { return !r.OK && strings.HasPrefix(r.Error, "TypeError") }},
		{"simplePost", "an opaque response", func(r scriptResult) bool { return r.OK && r.Type == "opaque" && r.Status == 0 }},
		{"readState", "a TypeError", func(r scriptResult) bool { return !r.OK && strings.HasPrefix(r.Error, "TypeError") }},
	} {
		got := call(tc.fn)
		t.Logf("%s() from %s saw %+v", tc.fn, foreign, got)
		if !tc.ok(got) {
			t.Errorf("%s() from %s: %+v, want %s", tc.fn, foreign, got, tc.what)
		}
	}
	if dom, _ := chromedp.Run(tctx, chromedp.TextContent(chromedp.CSS("#out"))); dom != "" {
		t.Errorf("the foreign page's DOM got text: %q", dom)
	}
	if n := gen.calls.Load(); n != 1 {
		t.Errorf("the foreign page's requests made %d more generations", n-1)
	}
	// The requests did reach the peer, and were refused there.
	if n := metricCount(t, api, "other", "403"); n < 1 {
		t.Errorf("the foreign preflight was not refused with 403 (%d)", n)
	}
	if n := metricCount(t, api, "/api/generate", "403"); n != 1 {
		t.Errorf("the foreign simple POST: %d 403s on /api/generate, want 1", n)
	}
	if n := metricCount(t, api, "/ui/", "403"); n != 1 {
		t.Errorf("the foreign read of /ui/state: %d 403s on /ui/, want 1", n)
	}
}
