package httpapi

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Config holds the HTTP API's settings. Start from DefaultConfig and change
// what you need; a Config is a plain value, copied by NewServer.
type Config struct {
	// ListenAddr is the TCP address ListenAndServe binds.
	ListenAddr string

	// APIToken, when set, is required as "Authorization: Bearer TOKEN" on
	// every endpoint except GET /healthz. It must be set when ListenAddr (or
	// the listener given to Serve) is not a loopback address.
	APIToken string

	// MaxBodyBytes caps a request body; larger bodies get 413.
	MaxBodyBytes int64

	// MaxPromptTokens caps a prompt after templating and tokenizing; 0
	// leaves the limit to the model's context length (a prompt must leave at
	// least one token of room for the reply).
	MaxPromptTokens int

	// MaxTokensLimit is the largest max_tokens (num_predict) a request may
	// ask for; larger values get 400. 0 means the model's context length.
	MaxTokensLimit int

	// DefaultMaxTokens bounds replies of requests that set no max_tokens;
	// 0 means until a stop condition or the context is full.
	DefaultMaxTokens int

	// RequestTimeout bounds one generation, queueing included; a request
	// past it fails with 504 (or a final error event when streaming had
	// started). 0 disables it.
	RequestTimeout time.Duration

	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration

	// ShutdownTimeout is how long a graceful shutdown waits for requests in
	// flight before closing their connections.
	ShutdownTimeout time.Duration

	// RetryAfter is the Retry-After a busy engine's answer (429 or 503)
	// suggests.
	RetryAfter time.Duration

	// Aliases maps extra model names to the served model's name, so clients
	// configured for another name ("gpt-4o-mini", "llama3") find it. Every
	// alias is listed by /v1/models and /api/tags.
	Aliases map[string]string

	// AllowedOrigins adds browser origins to DefaultAllowedOrigins: web
	// apps on these origins may call the API (CORS), and requests from
	// every other origin are refused with 403. Each entry is an origin
	// ("http://localhost:3000", "chrome-extension://ID"), one with a single
	// "*" ("https://*.example.com", "http://192.168.1.5:*"), or "*" for any
	// origin. The dashboard, /metrics and WithRoute's endpoints stay
	// same-origin only whatever this says. At most MaxAllowedOrigins.
	AllowedOrigins []string

	// Version is reported by GET /api/version. Ollama clients compare it
	// against the Ollama release whose API they need.
	Version string
}

// DefaultConfig returns the settings a peer serves with when nothing is
// configured. Every value is chosen for a single user on one machine.
func DefaultConfig() Config {
	return Config{
		// Loopback only: no token is needed and nothing else on the network
		// can reach the model. Port 11435 is one above Ollama's 11434, so
		// meshllm and Ollama can run side by side and Ollama clients need
		// only the port changed.
		ListenAddr: "127.0.0.1:11435",
		// No token on loopback; a non-loopback ListenAddr requires one.
		APIToken: "",
		// 8 MiB: a 128K-token prompt is about 512 KiB of text; this leaves
		// room for JSON escaping (up to 6 bytes a character) and long
		// chat histories, while a hostile client cannot make the peer
		// buffer more.
		MaxBodyBytes: 8 << 20,
		// The model's context decides.
		MaxPromptTokens: 0,
		// The model's context decides.
		MaxTokensLimit: 0,
		// Until a stop condition or the context is full, as Ollama
		// (num_predict -1) and llama.cpp's server do.
		DefaultMaxTokens: 0,
		// 10 minutes: a long reply from a CPU-only engine at a few tokens
		// per second still finishes; a stuck request does not hold its slot
		// forever.
		RequestTimeout: 10 * time.Minute,
		// 10 seconds: generous for any real client, fatal for slowloris.
		ReadHeaderTimeout: 10 * time.Second,
		// 10 seconds: short replies in flight finish, shutdown stays prompt.
		ShutdownTimeout: 10 * time.Second,
		// 1 second: a slot usually frees within a request's decode time.
		RetryAfter: time.Second,
		// No aliases.
		Aliases: nil,
		// Ollama's allowlist only (DefaultAllowedOrigins): pages on
		// localhost and 127.0.0.1, desktop and editor apps.
		AllowedOrigins: nil,
		// The Ollama release whose API (and Go client) this server
		// implements and is tested against.
		Version: "0.24.0",
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("node: MaxBodyBytes must be > 0, got %d", c.MaxBodyBytes)
	case c.MaxPromptTokens < 0:
		return fmt.Errorf("node: MaxPromptTokens must be >= 0, got %d", c.MaxPromptTokens)
	case c.MaxTokensLimit < 0:
		return fmt.Errorf("node: MaxTokensLimit must be >= 0, got %d", c.MaxTokensLimit)
	case c.DefaultMaxTokens < 0:
		return fmt.Errorf("node: DefaultMaxTokens must be >= 0, got %d", c.DefaultMaxTokens)
	case c.MaxTokensLimit > 0 && c.DefaultMaxTokens > c.MaxTokensLimit:
		return fmt.Errorf("node: DefaultMaxTokens %d exceeds MaxTokensLimit %d", c.DefaultMaxTokens, c.MaxTokensLimit)
	case c.RequestTimeout < 0 || c.ReadHeaderTimeout < 0 || c.ShutdownTimeout < 0 || c.RetryAfter < 0:
		return errors.New("node: timeouts must be >= 0")
	case strings.ContainsAny(c.APIToken, " \t\r\n"):
		return errors.New("node: APIToken must not contain white space")
	}
	if len(c.AllowedOrigins) > MaxAllowedOrigins {
		return fmt.Errorf("node: %d allowed origins, at most %d", len(c.AllowedOrigins), MaxAllowedOrigins)
	}
	for _, o := range c.AllowedOrigins {
		if _, err := parseOriginPattern(o); err != nil {
			return err
		}
	}
	for alias, name := range c.Aliases {
		if strings.TrimSpace(alias) == "" || strings.TrimSpace(name) == "" {
			return fmt.Errorf("node: empty model alias %q -> %q", alias, name)
		}
	}
	if c.ListenAddr != "" {
		if err := c.checkExposure(c.ListenAddr); err != nil {
			return err
		}
	}
	return nil
}

// checkExposure refuses to serve a non-loopback address without a token.
func (c Config) checkExposure(addr string) error {
	if c.APIToken != "" || isLoopback(addr) {
		return nil
	}
	return fmt.Errorf("node: listen address %q is reachable from other machines: set an API token (Config.APIToken) or listen on 127.0.0.1", addr)
}

// isLoopback reports whether a host:port address only accepts connections
// from this machine. An empty host means every interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
