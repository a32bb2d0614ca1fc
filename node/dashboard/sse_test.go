package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node"
)

// sseClient reads server-sent events from a live response.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

type sseEvent struct {
	name, id string
	data     []byte
}

// dialSSE opens url as an event stream. The stream is cancelled after a
// generous deadline, so that a stream that never sends fails the test
// instead of hanging it.
func dialSSE(t *testing.T, url string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseClient{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next event that has data (skipping the retry hint).
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	var ev sseEvent
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" {
			if ev.data != nil {
				return ev
			}
			ev = sseEvent{}
			continue
		}
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "event":
			ev.name = v
		case "id":
			ev.id = v
		case "data":
			ev.data = append(ev.data, v...)
		}
	}
}

func (c *sseClient) nextEvent(name string) Event {
	c.t.Helper()
	ev := c.next()
	if ev.name != name {
		c.t.Fatalf("event %q, want %q: %s", ev.name, name, ev.data)
	}
	var out Event
	if err := json.Unmarshal(ev.data, &out); err != nil {
		c.t.Fatalf("event data is not a Event: %v\n%s", err, ev.data)
	}
	return out
}

// waitUntil polls cond until it holds or a generous deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTestDashboard(t *testing.T, cfg Config) (*Dashboard, *testPeer, *testPeer, string) {
	t.Helper()
	hot := prompt(7, 256)
	a, b := forwardingPair(t, hot)
	cfg.Router = a.router
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d.Handler())
	t.Cleanup(hs.Close)
	return d, a, b, hs.URL
}

func TestDashboardEvents(t *testing.T) {
	d, a, _, url := newTestDashboard(t, Config{})
	c := dialSSE(t, url+"/ui/events")
	if ct := c.resp.Header.Get("Content-Type"); c.resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", c.resp.StatusCode, ct)
	}
	snap := c.nextEvent("snapshot")
	if snap.Self != "A" || len(snap.Status.Peers) != 1 || snap.Status.Peers[0].Peer != "B" || snap.IntervalMillis != 1000 {
		t.Fatalf("snapshot: %+v", snap)
	}
	if d.Clients() != 1 {
		t.Fatalf("%d clients, want 1", d.Clients())
	}

	req := infer.Request{Prompt: append(prompt(7, 256), prompt(9, 8)...), Sampling: infer.Sampling{MaxTokens: 2}}
	if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	d.Step()
	tick := c.nextEvent("tick")
	if tick.Seq != snap.Seq+1 || len(tick.Decisions) != 1 || tick.Decisions[0].Kind != feedForwarded || len(tick.Samples) != 1 {
		t.Fatalf("tick after a forward: %+v", tick)
	}
	d.Step()
	if tick := c.nextEvent("tick"); len(tick.Decisions) != 0 || tick.Seq != snap.Seq+2 || tick.Samples[0].Requests != 0 {
		t.Fatalf("quiet tick: %+v", tick)
	}

	// A page opened now starts from the history.
	c2 := dialSSE(t, url+"/ui/events")
	snap2 := c2.nextEvent("snapshot")
	if len(snap2.Decisions) != 1 || len(snap2.Samples) != 2 || snap2.Seq != snap.Seq+2 {
		t.Fatalf("second page's snapshot: %+v", snap2)
	}

	// A page that goes away is forgotten.
	c.close()
	c2.close()
	waitUntil(t, "the dashboard to notice the pages left", func() bool { return d.Clients() == 0 })
}

func TestDashboardEventsCap(t *testing.T) {
	d, _, _, url := newTestDashboard(t, Config{MaxClients: 1})
	c := dialSSE(t, url+"/ui/events")
	c.nextEvent("snapshot")
	resp, err := http.Get(url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("page over the cap: %d %v", resp.StatusCode, resp.Header)
	}
	c.close()
	waitUntil(t, "the first page to leave", func() bool { return d.Clients() == 0 })
	c3 := dialSSE(t, url+"/ui/events")
	c3.nextEvent("snapshot")
}

func TestDashboardDropsSlowPage(t *testing.T) {
	d, _, _, _ := newTestDashboard(t, Config{})
	sub, _, err := d.subscribe()
	if err != nil {
		t.Fatal(err)
	}
	for range subscriberBuffer {
		d.Step()
	}
	if d.Clients() != 1 {
		t.Fatal("a page with room in its buffer was dropped")
	}
	d.Step() // one more than the buffer holds
	if d.Clients() != 0 {
		t.Fatal("a page a whole buffer behind is still connected")
	}
	n := 0
	for range sub.ch {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("the dropped page could still read %d events, want %d", n, subscriberBuffer)
	}
	d.unsubscribe(sub) // the handler's deferred call: must not close twice
}

// chanTicker is a Ticker the test drives.
type chanTicker chan time.Time

func (c chanTicker) C() <-chan time.Time { return c }
func (c chanTicker) Stop()               {}

func TestDashboardRun(t *testing.T) {
	tick := make(chanTicker)
	d, _, _, url := newTestDashboard(t, Config{NewTicker: func(time.Duration) node.Ticker { return tick }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	c := dialSSE(t, url+"/ui/events")
	snap := c.nextEvent("snapshot")
	tick <- time.Now()
	if ev := c.nextEvent("tick"); ev.Seq != snap.Seq+1 {
		t.Fatalf("tick seq %d after snapshot %d", ev.Seq, snap.Seq)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	// The stream ends with Run, and no new one starts.
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("the stream outlived Run")
	}
	resp, err := http.Get(url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a page after Run stopped got %d", resp.StatusCode)
	}
}
