package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/prometheus/client_golang/prometheus"
)

// uiFiles are the dashboard's page, script and style sheet: plain HTML,
// JavaScript and CSS, no build step.
//
//go:embed ui
var uiFiles embed.FS

// Config configures a Dashboard. Every field but Router has a
// usable zero value.
type Config struct {
	// Router is the peer's router (required): its mesh status and its
	// ring buffer of decisions are what the page shows.
	Router *node.Router
	// Registry is where the HTTP API records its metrics (Server.Registry
	// or the registry given to WithRegistry); the dashboard reads the
	// time-to-first-token histogram from it. Nil leaves the TTFT chart
	// empty.
	Registry prometheus.Gatherer
	// HotPrefixes returns this peer's hottest cached prefixes, hottest
	// first (see HotPrefixes for one built on the engine's radix tree). It
	// is called once per interval from the Run loop and must be safe for
	// concurrent use with the engine. Nil shows none.
	HotPrefixes func() []HotPrefix
	// Interval between updates; 0 means 1 s.
	Interval time.Duration
	// History is how many intervals of chart samples are kept (and sent to
	// a page when it connects); 0 means 600 (ten minutes at 1 s).
	History int
	// Decisions is how many decisions a connecting page receives; 0 means
	// 50.
	Decisions int
	// MaxClients caps concurrent event streams; one more is refused with
	// 503. 0 means 16: each stream costs a goroutine and a marshalled
	// event per interval, and a dashboard is watched by a person or two.
	MaxClients int
	// NewTicker makes Run's ticker; nil uses time.NewTicker.
	NewTicker func(time.Duration) node.Ticker
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Dashboard is a peer's live web page: the mesh as a picture, each peer's
// load and cache, a feed of routing decisions and charts over time. It is
// served under /ui/ (Handler) and, for browsers, at / (WithDashboard).
//
// Run is its loop: every interval it samples the router (status, new
// decisions, TTFT) into a history ring and sends one event to every
// connected page. Without Run, pages get the snapshot they connect with
// and nothing after it.
//
// Concurrency: one mutex guards the history, the decision cursor and the
// subscribers; Run (one goroutine), Step and the HTTP handlers may be
// called from any goroutines. Events are marshalled once per interval and
// handed to each page's buffered channel; a page that falls behind by a
// whole buffer is disconnected (its browser reconnects and gets a fresh
// snapshot), so a slow client never holds the loop up.
type Dashboard struct {
	cfg    Config
	self   node.PeerID
	static http.Handler

	mu        sync.Mutex
	cursor    decisionCursor
	hist      []Sample // ring, oldest at histNext when full
	histNext  int
	histFull  bool
	decisions []DecisionEvent // the latest cfg.Decisions, oldest first
	ttft      ttftCounter
	seq       uint64 // events sent
	subs      map[*subscriber]struct{}
	closed    bool
}

// New returns a dashboard over cfg.Router; it does not start Run.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Router == nil {
		return nil, errors.New("node: Config needs a Router")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 600
	}
	if cfg.Decisions <= 0 {
		cfg.Decisions = 50
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 16
	}
	if cfg.NewTicker == nil {
		cfg.NewTicker = node.NewStdTicker
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{
		cfg:    cfg,
		self:   cfg.Router.Mesh().Self(),
		static: http.StripPrefix("/ui/", http.FileServerFS(sub)),
		hist:   make([]Sample, cfg.History),
		subs:   map[*subscriber]struct{}{},
	}
	// Decisions made before the dashboard existed are history, not news.
	d.cursor.advance(cfg.Router.Recent())
	d.ttft.delta(cfg.Registry)
	return d, nil
}

// Handler serves the dashboard under /ui/: the page at /ui/, its assets,
// the event stream at /ui/events and one snapshot as JSON at /ui/state.
// Mount it at "/ui/" (WithDashboard does).
func (d *Dashboard) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ui/events":
			d.serveEvents(w, r)
		case "/ui/state":
			writeJSON(w, d.Snapshot())
		case "/ui", "/ui/", "/ui/index.html":
			d.serveIndex(w, r)
		default:
			if !strings.HasPrefix(r.URL.Path, "/ui/") {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			d.static.ServeHTTP(w, r)
		}
	})
}

// serveIndex sends the page itself (also for / in browsers).
func (d *Dashboard) serveIndex(w http.ResponseWriter, r *http.Request) {
	b, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		http.Error(w, "dashboard page missing from the binary", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// No other page may frame the dashboard (clickjacking): CSP for
	// today's browsers, X-Frame-Options for older ones.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}

// Run updates the dashboard every interval until ctx is done, then
// disconnects every page and returns ctx's error.
func (d *Dashboard) Run(ctx context.Context) error {
	t := d.cfg.NewTicker(d.cfg.Interval)
	defer t.Stop()
	defer d.closeAll()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			d.Step()
		}
	}
}

// Clients returns the number of pages connected to the event stream.
func (d *Dashboard) Clients() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.subs)
}

// writeJSON sends v as a 200 JSON answer.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the response failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
