package httpapi

import (
	"net/http"
	"strconv"
	"strings"
)

// serveRoot serves GET and HEAD /: the dashboard's page to a browser (a
// request that accepts text/html) when WithDashboard mounted one, and the
// plain "meshllm is running" line to everything else — Ollama's clients
// probe / and read that line.
func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	if h := s.dashboardHandler(); h != nil && acceptsHTML(r) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = dashboardPath
		r2.URL.RawPath = ""
		h.ServeHTTP(w, r2)
		return
	}
	s.handleRoot(w, r)
}

// WithDashboard mounts a dashboard's handler h on a Server: GET /ui/ and
// everything under it, behind the API's authentication and metrics, and
// GET / for browsers (requests that accept text/html); other clients of /
// keep the plain "meshllm is running" line Ollama clients probe for. h is
// called with the request's path unchanged (/ arrives as /ui/).
func WithDashboard(h http.Handler) Option {
	return func(s *Server) {
		if h != nil {
			s.extra = append(s.extra, extraRoute{pattern: "GET " + dashboardPath, h: h})
		}
	}
}

// dashboardPath is where WithDashboard mounts the dashboard.
const dashboardPath = "/ui/"

// dashboardHandler returns the handler mounted at dashboardPath, if any.
func (s *Server) dashboardHandler() http.Handler {
	for _, e := range s.extra {
		if e.pattern == "GET "+dashboardPath {
			return e.h
		}
	}
	return nil
}

// acceptsHTML reports whether the request's Accept header names
// text/html with a non-zero quality, as browsers' page loads do (curl and
// API clients send */* or nothing).
func acceptsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(mt), "text/html") {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				if k, val, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(val, 64); err == nil {
						q = f
					}
				}
			}
			return q > 0
		}
	}
	return false
}
