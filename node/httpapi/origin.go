package httpapi

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Local-origin protection: which requests a browser may make. Two checks
// run on every request, before authentication and before a handler reads
// the body (see Server.guard):
//
//   - Host (DNS rebinding): on a loopback listener, a request must be
//     addressed to a loopback name (localhost, *.localhost) or IP. A page
//     whose DNS name was rebound to 127.0.0.1 still sends its own name.
//   - Origin (cross-site requests): a request that carries an Origin must
//     come from an allowed origin, whatever its method: browsers send
//     "simple" cross-site POSTs (text/plain) without asking first, so
//     leaving out the CORS headers is not enough.
//
// Allowed origins get CORS answers (preflights included). The dashboard,
// /metrics and WithRoute's endpoints are same-origin only.

// maxOriginLen bounds an Origin header and an allowlist entry; real origins
// are far shorter (a DNS name is at most 253 bytes).
const maxOriginLen = 512

// MaxAllowedOrigins bounds Config.AllowedOrigins.
const MaxAllowedOrigins = 256

// DefaultAllowedOrigins returns the origins every Server allows, Ollama's
// list at the pinned version plus IPv6 loopback: http and https on
// localhost, 127.0.0.1, 0.0.0.0 and [::1], any port, and the schemes of
// desktop and editor apps (app, file, tauri, vscode-webview, vscode-file).
// Config.AllowedOrigins adds to it. A new slice each call.
func DefaultAllowedOrigins() []string {
	var out []string
	for _, host := range []string{"localhost", "127.0.0.1", "0.0.0.0", "[::1]"} {
		for _, scheme := range []string{"http", "https"} {
			out = append(out, scheme+"://"+host, scheme+"://"+host+":*")
		}
	}
	for _, scheme := range []string{"app", "file", "tauri", "vscode-webview", "vscode-file"} {
		out = append(out, scheme+"://*")
	}
	return out
}

// originPattern is one compiled allowlist entry: an exact origin (star
// false), or prefix*suffix where the star stands for any run of the
// characters an origin's host and port are made of.
type originPattern struct {
	prefix, suffix string
	star           bool
}

// parseOriginPattern checks and compiles one allowlist entry: "*" (any
// origin), "null" (the opaque origin of sandboxed frames and file pages:
// allowing it lets any site in through a sandboxed iframe), an origin such
// as "http://localhost:3000" or "chrome-extension://abcdef", or one with a
// single "*" such as "http://localhost:*" or "https://*.example.com".
// Case does not matter; one trailing "/" is dropped.
func parseOriginPattern(entry string) (originPattern, error) {
	p := strings.ToLower(strings.TrimSpace(entry))
	p = strings.TrimSuffix(p, "/")
	if p == "*" {
		return originPattern{star: true}, nil
	}
	if p == "null" {
		return originPattern{prefix: p}, nil
	}
	bad := func(why string) (originPattern, error) {
		return originPattern{}, fmt.Errorf("node: allowed origin %q: %s (want scheme://host[:port], e.g. http://localhost:3000 or chrome-extension://ID; one * allowed, e.g. http://localhost:*)", entry, why)
	}
	if len(p) > maxOriginLen {
		return bad("too long")
	}
	scheme, rest, ok := strings.Cut(p, "://")
	if !ok || !validScheme(scheme) {
		return bad("no scheme")
	}
	if strings.ContainsAny(rest, "/?#@, \t\r\n\\") {
		return bad("an origin has no path, query, user or spaces")
	}
	before, after, star := strings.Cut(p, "*")
	if !star {
		if _, ok := parseOrigin(p); !ok {
			return bad("not an origin")
		}
		return originPattern{prefix: p}, nil
	}
	if strings.Contains(after, "*") {
		return bad("more than one *")
	}
	if len(before) < len(scheme)+3 {
		return bad("the * must be in the host or port")
	}
	return originPattern{prefix: before, suffix: after, star: true}, nil
}

// matches reports whether the lower-cased, well-formed origin o fits p.
func (p originPattern) matches(o string) bool {
	if !p.star {
		return o == p.prefix
	}
	return len(o) >= len(p.prefix)+len(p.suffix) && strings.HasPrefix(o, p.prefix) && strings.HasSuffix(o, p.suffix)
}

func validScheme(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// parseOrigin lower-cases an Origin header and reports whether it is one a
// browser could send: "null", or scheme://host[:port] with nothing after
// (the host may be empty, as in file://, or a bracketed IPv6 address).
func parseOrigin(origin string) (string, bool) {
	if len(origin) > maxOriginLen {
		return "", false
	}
	o := strings.ToLower(origin)
	if o == "null" {
		return o, true
	}
	scheme, hostport, ok := strings.Cut(o, "://")
	if !ok || !validScheme(scheme) {
		return "", false
	}
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", false
		}
		if _, err := netip.ParseAddr(hostport[1:end]); err != nil {
			return "", false
		}
		host, port = "", hostport[end+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i:]
	}
	if port != "" {
		n, err := strconv.Atoi(port[1:])
		if err != nil || n < 0 || n > 65535 || port[1] == '+' || port[1] == '-' {
			return "", false
		}
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '~' || c == '%') {
			return "", false
		}
	}
	return o, true
}

// originMatcher is a compiled allowlist. It is not changed after
// newOriginMatcher and is safe for concurrent use.
type originMatcher struct {
	exact    map[string]bool
	patterns []originPattern
	any      bool
}

// newOriginMatcher compiles DefaultAllowedOrigins plus extra.
func newOriginMatcher(extra []string) (*originMatcher, error) {
	m := &originMatcher{exact: map[string]bool{}}
	for _, e := range append(DefaultAllowedOrigins(), extra...) {
		p, err := parseOriginPattern(e)
		if err != nil {
			return nil, err
		}
		switch {
		case p.star && p.prefix == "" && p.suffix == "":
			m.any = true
		case p.star:
			m.patterns = append(m.patterns, p)
		default:
			m.exact[p.prefix] = true
		}
	}
	return m, nil
}

// allows reports whether a request's Origin header is on the list. A
// malformed origin is never allowed, not even by "*".
func (m *originMatcher) allows(origin string) bool {
	o, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	if m.any || m.exact[o] {
		return true
	}
	for _, p := range m.patterns {
		if p.matches(o) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether a request's Host names this machine:
// localhost or a name under .localhost (browsers resolve them to loopback
// themselves, never through DNS), a loopback IP, or an unspecified one
// (0.0.0.0, [::]: clients that dial the address a server printed, as
// Ollama's do). IP literals cannot be rebound; every other name can, so it
// is refused, and so is an empty Host (HTTP/1.0 without one). Any port.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), ".")
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// sameOrigin reports whether origin is the page's own: the request's Host
// over http (or https, behind a TLS proxy).
func sameOrigin(origin, host string) bool {
	o, h := strings.ToLower(origin), strings.ToLower(host)
	return h != "" && (o == "http://"+h || o == "https://"+h)
}
