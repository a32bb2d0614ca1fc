package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/meshllm/meshllm/node"
)

// screenshot is where TestDashboardInBrowser saves its picture of the page;
// empty (the default, so test runs leave the tree clean) saves nothing. The
// one in the docs is made with
//
//	go test ./testnet/uitest -run Browser -screenshot ../../docs/img/dashboard.png
var screenshot = flag.String("screenshot", "",
	"where TestDashboardInBrowser saves its screenshot of the page (empty: nowhere)")

// chromium finds a Chromium or Chrome on PATH.
func chromium() (string, bool) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// words returns a prompt of n words that starts with topic.
func words(topic string, n int) string {
	var b strings.Builder
	b.WriteString(topic)
	for i := range n {
		fmt.Fprintf(&b, " %s%d", topic[:3], i%89)
	}
	return b.String()
}

// complete sends a completion to a peer's OpenAI API.
func complete(t *testing.T, base, prompt string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 4})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion at %s: %d %s", base, resp.StatusCode, b)
	}
}

// longReply keeps one of a peer's slots busy until ctx is done.
func longReply(ctx context.Context, base string) {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": "Recite a very long poem.", "max_tokens": 1500})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// lastDecision returns the router's latest decision.
func lastDecision(t *testing.T, p *peer) node.DecisionRecord {
	t.Helper()
	recs := p.router.Recent()
	if len(recs) == 0 {
		t.Fatal("no decision recorded")
	}
	return recs[len(recs)-1]
}

// waitUntil polls cond until it holds or a generous deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDashboardInBrowser starts three peers — B holds a geography prompt
// 3 ms from A, C a history prompt 900 ms from A — sends A one request of
// each kind, and loads A's dashboard in headless Chromium: the peers, the
// mesh picture and the decisions (forwarded to B, refused for C's link,
// served locally) must appear, a request made while the page is open must
// arrive live, and no script may throw.
func TestDashboardInBrowser(t *testing.T) {
	exe := requireChromium(t)
	ctx := t.Context()
	b := newBus()
	b.link("A", "B", 3*time.Millisecond)
	b.link("A", "C", 900*time.Millisecond)
	b.link("B", "C", 40*time.Millisecond)

	geo, hist := words("geography", 400), words("history", 400)
	var labelMu sync.Mutex
	families := map[string][]int32{}
	label := func(head []int32) string {
		labelMu.Lock()
		defer labelMu.Unlock()
		for name, toks := range families {
			if n := min(len(head), len(toks)); n > 1 && slices.Equal(head[:n], toks[:n]) {
				return name
			}
		}
		return "" // a hash label
	}
	a := b.add(t, ctx, "A", label)
	pb := b.add(t, ctx, "B", label)
	pc := b.add(t, ctx, "C", label)
	labelMu.Lock()
	families["“You are a geography tutor…” (400 words)"], _ = a.eng.Tokenize(geo)
	families["“You are a history tutor…” (400 words)"], _ = a.eng.Tokenize(hist)
	labelMu.Unlock()

	complete(t, pb.url, geo+" Which river is longest?")
	complete(t, pc.url, hist+" When did Rome fall?")
	waitUntil(t, "A to hear of B's and C's caches and loads", func() bool {
		ps := a.router.Mesh().Peers(time.Now())
		return len(ps) == 2 && ps[0].DigestBlocks > 0 && ps[1].DigestBlocks > 0 && ps[0].Load != nil && ps[1].Load != nil
	})
	complete(t, a.url, geo+" Which mountain is highest?")
	if d := lastDecision(t, a); d.ServedBy != "B" {
		t.Fatalf("the geography question was not forwarded to B: %+v", d)
	}
	complete(t, a.url, hist+" Who was Hannibal?")
	if d := lastDecision(t, a); d.Reason != node.ReasonRefusedRTT || d.ServedBy != "" {
		t.Fatalf("the history question was not refused for C's 900 ms link: %+v", d)
	}
	complete(t, a.url, "Tell me a short story about a lighthouse keeper.")

	// The browser.
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	var exMu sync.Mutex
	var exceptions []string
	// The first action starts the browser: it runs on a context without a
	// deadline (a deadline there would bound the browser's life).
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok && e.ExceptionDetails != nil {
			d := e.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil {
				msg += ": " + d.Exception.Description
			}
			exMu.Lock()
			exceptions = append(exceptions, msg)
			exMu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting Chromium (%s): %v", exe, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(a.url+"/")); err != nil {
		t.Fatalf("loading A's dashboard: %v", err)
	}
	tctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	if err := chromedp.Do(tctx,
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="B"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="C"]`)),
		chromedp.WaitReady(chromedp.CSS(`#mesh g.node[data-peer="A"]`)),
		chromedp.WaitReady(chromedp.CSS(`#mesh g.node[data-peer="B"]`)),
		chromedp.WaitReady(chromedp.CSS(`#mesh g.node[data-peer="C"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#decisions li.kind-forwarded`)),
		chromedp.WaitVisible(chromedp.CSS(`#decisions li.kind-refused`)),
		chromedp.WaitVisible(chromedp.CSS(`#decisions li.kind-local`)),
	); err != nil {
		t.Fatalf("A's dashboard: %v", err)
	}
	text := func(sel string) string { // textContent: SVG elements have no innerText
		t.Helper()
		s, err := chromedp.Run(tctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	if s := text(`#decisions li.kind-forwarded .summary`); !strings.Contains(s, "forwarded to B") {
		t.Errorf("forwarded entry: %q", s)
	}
	if s := text(`#decisions li.kind-refused .summary`); !strings.Contains(s, "link cost more than the prefill it saves") {
		t.Errorf("refused entry: %q", s)
	}
	if s := text(`#conn`); s != "live" {
		t.Errorf("connection badge %q, want live", s)
	}
	if s := text(`#mesh g.node[data-peer="C"] text.name`); s != "C" {
		t.Errorf("C's node in the picture says %q", s)
	}
	if s := text(`#mesh`); !strings.Contains(s, "900 ms") || !strings.Contains(s, "3.0 ms") {
		t.Errorf("the picture's links lack their RTTs: %q", s)
	}

	// Live: requests made while the page is open arrive by the event
	// stream and the charts fill in: a mixed workload paced over about
	// three seconds (a dozen dashboard intervals), while C is busy with a
	// long reply so that its load shows.
	busy, stopBusy := context.WithCancel(ctx)
	defer stopBusy()
	go longReply(busy, pc.url)
	pace := time.NewTicker(120 * time.Millisecond)
	defer pace.Stop()
	const live = 24
	for i := range live {
		<-pace.C
		switch i % 3 {
		case 0:
			complete(t, a.url, geo+fmt.Sprintf(" Name a capital, %d.", i))
		case 1:
			complete(t, a.url, hist+fmt.Sprintf(" Name an emperor, %d.", i))
		default:
			complete(t, a.url, fmt.Sprintf("Write a haiku about the number %d.", i))
		}
	}
	want := 3 + live
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](
		fmt.Sprintf(`document.querySelectorAll('#decisions li.decision').length >= %d`, want),
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting for the live decisions: %v", err)
	}
	n, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('#decisions li.decision').length`))
	if err != nil || n != want {
		t.Errorf("the feed shows %d decisions (%v), want %d", n, err, want)
	}
	if fwd, _ := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('#decisions li.kind-forwarded').length`)); fwd != 1+live/3 {
		t.Errorf("the feed shows %d forwarded decisions, want %d", fwd, 1+live/3)
	}
	hot, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#hot .label')].map(e => e.textContent)`))
	if err != nil || !slices.ContainsFunc(hot, func(s string) bool { return strings.Contains(s, "history tutor") }) {
		t.Errorf("A's hot prefixes %q (%v) lack the history prompt A now caches", hot, err)
	}
	// Two more ticks draw the charts before the picture is taken.
	seq, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.dataset.seq`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](fmt.Sprintf(`Number(document.body.dataset.seq) >= %s + 2`, seq),
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("waiting for two ticks after seq %s: %v", seq, err)
	}
	exMu.Lock()
	if len(exceptions) > 0 {
		t.Errorf("the page threw: %q", exceptions)
	}
	exMu.Unlock()

	if *screenshot == "" {
		return
	}
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(*screenshot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of A's dashboard: %s (%d bytes)", *screenshot, len(png))
}
