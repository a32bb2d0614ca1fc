package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// The guard in front of every route: the Host and Origin checks of
// origin.go applied to a request, and the CORS answers allowed origins get.

// corsAllowHeaders are the request headers a preflight always allows:
// Ollama's list, which names the OpenAI SDKs' headers, plus the SDKs'
// organization and project headers.
const corsAllowHeaders = "Authorization, Content-Type, User-Agent, Accept, X-Requested-With, " +
	"OpenAI-Beta, OpenAI-Organization, OpenAI-Project, " +
	"x-stainless-arch, x-stainless-async, x-stainless-custom-poll-interval, x-stainless-helper-method, " +
	"x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-poll-helper, " +
	"x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout"

// CORS answer headers.
const (
	corsAllowMethods  = "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"
	corsExposeHeaders = "Retry-After, WWW-Authenticate, Allow"
	// corsMaxAge is Chromium's cap on caching a preflight (2 hours);
	// Firefox allows 24. A longer value is cut to it anyway.
	corsMaxAge = "7200"
	// maxRequestedHeaders bounds how many names of
	// Access-Control-Request-Headers are read.
	maxRequestedHeaders = 64
)

// allowHeaders answers a preflight's Access-Control-Request-Headers: the
// fixed list, plus the requested names it does not spell out that the API
// accepts — the OpenAI SDKs add x-stainless-* headers release by release.
// Other requested names are left out, and the browser then refuses the
// request.
func allowHeaders(requested string) string {
	out := corsAllowHeaders
	n := 0
	for name := range strings.SplitSeq(requested, ",") {
		if n++; n > maxRequestedHeaders {
			break
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if len(name) > 64 || !strings.HasPrefix(name, "x-stainless-") || !isToken(name) || listed(name) {
			continue
		}
		out += ", " + name
	}
	return out
}

func listed(name string) bool {
	for h := range strings.SplitSeq(corsAllowHeaders, ", ") {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

func isToken(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != ""
}

// clip shortens a client-sent value for an error message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// typePermission is OpenAI's error type for 403.
const typePermission = "permission_error"

// forbidden is the 403 every refusal of this file sends.
func forbidden(format string, args ...any) *apiError {
	return &apiError{status: http.StatusForbidden, typ: typePermission, code: "forbidden_origin", message: fmt.Sprintf(format, args...)}
}

// guard runs the Host and Origin checks and the CORS answers for one
// request, before authentication. It returns false when it has answered
// (a refusal, or a preflight) and the handler must not run.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	d := dialectOf(r.URL.Path)
	if s.checksHost(r) && !loopbackHost(r.Host) {
		s.writeError(w, d, forbidden("host %q is not allowed: this peer listens on loopback and answers only requests to localhost, 127.0.0.1 or [::1] "+
			"(a web page whose DNS name points here is refused); to serve other names, listen on another address with an API token", clip(r.Host)))
		return false
	}
	origin := r.Header.Get("Origin")
	if s.sameOriginOnly(r) {
		if origin != "" && !sameOrigin(origin, r.Host) {
			s.writeError(w, d, forbidden("%s is same-origin only: requests from %q are refused", clip(r.URL.Path), clip(origin)))
			return false
		}
		// Fetch metadata: a page elsewhere cannot even make a no-cors
		// request (an <img>, a <script>) here; a link still navigates.
		if site := r.Header.Get("Sec-Fetch-Site"); (site == "cross-site" || site == "same-site") && r.Header.Get("Sec-Fetch-Mode") != "navigate" {
			s.writeError(w, d, forbidden("%s is same-origin only: %s requests are refused", clip(r.URL.Path), site))
			return false
		}
		return true
	}
	w.Header().Add("Vary", "Origin")
	if origin == "" || sameOrigin(origin, r.Host) {
		return true
	}
	if !s.origins.allows(origin) {
		s.writeError(w, d, forbidden("origin %q is not allowed: start the peer with --allowed-origins %s (or MESHLLM_ORIGINS) to let that web app use the API", clip(origin), clip(origin)))
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", allowHeaders(strings.Join(r.Header.Values("Access-Control-Request-Headers"), ",")))
		h.Set("Access-Control-Max-Age", corsMaxAge)
		// Chromium's Private Network Access asks before a public
		// (https) page reaches a local address; the origin is allowed.
		if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	return true
}

// loopbackBindKey marks, in the context Serve gives its requests, whether
// the listener is a loopback one.
type loopbackBindKey struct{}

// checksHost reports whether r's Host must be a loopback name: when it
// came in on a loopback listener — the one Serve was given, or, for Handler
// mounted in another http.Server, the connection's local address. A
// request that came through no listener (a handler called in process) has
// no network peer to guard against and is not checked.
func (s *Server) checksHost(r *http.Request) bool {
	if v, ok := r.Context().Value(loopbackBindKey{}).(bool); ok {
		return v
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
		return isLoopback(a.String())
	}
	return false
}

// sameOriginOnly reports whether r is for the dashboard (/, /ui/...),
// /metrics or an endpoint WithRoute added (such as /v1/mesh): pages no
// other origin may read or drive.
func (s *Server) sameOriginOnly(r *http.Request) bool {
	_, pattern := s.private.Handler(r)
	return pattern != ""
}

// privateMux builds the mux sameOriginOnly matches against: patterns
// without methods, so that a preflight (OPTIONS) matches too.
func (s *Server) privateMux() *http.ServeMux {
	mux := http.NewServeMux()
	seen := map[string]bool{}
	paths := []string{"/{$}", "/metrics", dashboardPath}
	for _, e := range s.extra {
		_, path, ok := strings.Cut(e.pattern, " ")
		if !ok {
			path = e.pattern
		}
		paths = append(paths, path)
	}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			mux.Handle(p, http.NotFoundHandler())
		}
	}
	return mux
}
