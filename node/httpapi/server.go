package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Server is one peer's HTTP API over a Generator.
//
// A Server is safe for concurrent use. Handler may be mounted in any
// http.Server; Serve and ListenAndServe run one of their own and may be
// called more than once (on different listeners) concurrently.
type Server struct {
	cfg     Config
	gen     Generator
	log     *slog.Logger
	now     func() time.Time
	reg     *prometheus.Registry
	metrics *metrics
	aliases []string // sorted alias names that point at the served model
	handler http.Handler
	idBase  string         // random per server, so IDs differ across peers
	idSeq   atomic.Uint64  // makes IDs unique within the server
	extra   []extraRoute   // added by WithRoute
	origins *originMatcher // allowed browser origins (origin.go)
	private *http.ServeMux // same-origin-only paths (origin.go)

	keep keepAliveState // Ollama's keep_alive: what /api/ps reports
	emb  Embeddings     // set by WithEmbeddings; nil: the Generator if it embeds
}

// Option changes how NewServer builds a Server.
type Option func(*Server)

// WithLogger sets the logger for errors the client cannot see (failed
// writes, engine failures). The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) {
		if l != nil {
			s.log = l
		}
	}
}

// WithClock sets the clock used for timestamps in responses and for
// latency metrics; tests inject a fake one. It must be safe for concurrent
// use. The default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Server) {
		if now != nil {
			s.now = now
		}
	}
}

// WithRegistry makes the Server register its metrics on reg (and serve reg
// at /metrics) instead of a registry of its own, so that the router's and
// the p2p layer's metrics come out of the same endpoint.
func WithRegistry(reg *prometheus.Registry) Option {
	return func(s *Server) {
		if reg != nil {
			s.reg = reg
		}
	}
}

// WithRoute adds an endpoint (a GET/POST path pattern such as
// "GET /v1/mesh") behind the same authentication and metrics as the APIs.
func WithRoute(pattern string, h http.Handler) Option {
	return func(s *Server) {
		s.extra = append(s.extra, extraRoute{pattern: pattern, h: h})
	}
}

type extraRoute struct {
	pattern string
	h       http.Handler
}

// NewServer builds the HTTP API serving gen (an infer.Engine, or the mesh
// router in front of one). It checks cfg and registers the metrics on a
// registry of the Server's own (see Registry).
func NewServer(cfg Config, gen Generator, opts ...Option) (*Server, error) {
	if gen == nil {
		return nil, errors.New("node: NewServer needs a Generator")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	info := gen.Info()
	if info.Name == "" {
		return nil, errors.New("node: the served model has no name")
	}
	s := &Server{
		cfg: cfg,
		gen: gen,
		log: slog.New(slog.DiscardHandler),
		now: time.Now,
		reg: prometheus.NewRegistry(),
	}
	s.cfg.Aliases = make(map[string]string, len(cfg.Aliases))
	for alias, target := range cfg.Aliases {
		if !strings.EqualFold(target, info.Name) && !strings.EqualFold(target, info.ID) {
			return nil, fmt.Errorf("node: alias %q points at %q, but the served model is %q", alias, target, info.Name)
		}
		s.cfg.Aliases[alias] = target
		s.aliases = append(s.aliases, alias)
	}
	slices.Sort(s.aliases)
	for _, o := range opts {
		o(s)
	}
	var seed [6]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails
	s.idBase = hex.EncodeToString(seed[:])
	origins, err := newOriginMatcher(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	s.origins = origins
	s.cfg.AllowedOrigins = slices.Clone(cfg.AllowedOrigins)
	s.private = s.privateMux()
	m, err := newMetrics(s.reg, gen)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.handler = s.withDeadlines(s.routes())
	return s, nil
}

// Handler returns the API's handler: every endpoint, authentication and
// metrics included, and the body and write deadlines (Config.BodyTimeout,
// Config.WriteTimeout) on whichever http.Server serves it.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the Server's Prometheus registry, which GET /metrics
// serves; callers may register collectors of their own on it.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Config returns (a copy of) the configuration the Server runs with.
func (s *Server) Config() Config {
	c := s.cfg
	c.Aliases = maps.Clone(s.cfg.Aliases)
	c.AllowedOrigins = slices.Clone(s.cfg.AllowedOrigins)
	return c
}

// ListenAndServe listens on Config.ListenAddr and serves until ctx is
// cancelled (see Serve).
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves the API on ln until ctx is cancelled, then shuts down
// gracefully: it stops accepting, lets requests in flight finish for up to
// Config.ShutdownTimeout, then cancels the rest (their generations stop)
// and closes ln. It returns nil after a shutdown caused by ctx, or the error
// that stopped serving. Serve refuses a non-loopback listener when no API
// token is set; on a loopback listener it answers only requests addressed
// to a loopback name (the Host check of origin.go). It holds at most
// Config.MaxConnections connections open and closes those idle for
// Config.IdleTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.cfg.checkExposure(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	if s.cfg.MaxConnections > 0 {
		ln = newLimitListener(ln, s.cfg.MaxConnections)
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	// The Host check (origin.go) follows the listener: on for loopback.
	reqBase := context.WithValue(base, loopbackBindKey{}, isLoopback(ln.Addr().String()))
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		// Idle keep-alive connections; ReadTimeout and WriteTimeout stay
		// off, as they would cut long streams (see withDeadlines).
		IdleTimeout: s.cfg.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return reqBase },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("node: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown: cancelling requests still in flight", "err", err)
		cancelBase()
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

// newID returns a response ID such as "chatcmpl-1a2b3c4d5e6f-7".
func (s *Server) newID(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, s.idBase, s.idSeq.Add(1))
}

// authorized checks the Bearer token in constant time.
// tokenCookie carries the API token for browsers, which cannot send an
// Authorization header when the user opens the dashboard.
const tokenCookie = "meshllm_token"

// browserAuthorized lets a browser in with the token as a cookie, set by
// opening any GET page once with ?token=TOKEN. Only GET and HEAD requests
// (the dashboard, its event stream and assets, read-only endpoints) accept
// the cookie, and it is SameSite=Strict and HttpOnly: a page on another site
// can neither send it with a forged POST nor read it.
func (s *Server) browserAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.APIToken == "" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	if c, err := r.Cookie(tokenCookie); err == nil && s.tokenMatches(c.Value) {
		return true
	}
	if q := r.URL.Query().Get("token"); q != "" && s.tokenMatches(q) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	return false
}

func (s *Server) tokenMatches(got string) bool {
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.cfg.APIToken)) == 1
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIToken == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && s.tokenMatches(got)
}
