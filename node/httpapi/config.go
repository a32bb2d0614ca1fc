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

	// BodyTimeout bounds reading a request's body, from the end of its
	// headers to its last byte; a body still arriving then is cut with 408
	// and its connection closed. It does not touch the reply: the deadline
	// is lifted once the body is read. 0 disables it.
	BodyTimeout time.Duration

	// WriteTimeout bounds each write to a client (a streamed event, a
	// reply, a flush), not the whole response as http.Server's field of the
	// same name does: every write gets a fresh deadline, so a stream of any
	// length keeps going while its client reads, and a client that stops
	// reading loses its request (which frees its slot). 0 disables it.
	WriteTimeout time.Duration

	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before the server closes it. 0 disables it (connections are
	// then kept until the client closes them).
	IdleTimeout time.Duration

	// MaxConnections caps the connections Serve (and ListenAndServe) holds
	// open at once; beyond it, new connections wait in the listen backlog
	// until one closes. 0 means no limit.
	MaxConnections int

	// MaxPromptBytesPerToken bounds a prompt's length in bytes before it is
	// tokenized: a prompt (or rendered chat) longer than this many bytes
	// per token of the context (or of MaxPromptTokens, when smaller) is a
	// 400 without running the tokenizer. 0 disables the check.
	MaxPromptBytesPerToken int

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
		// 1 minute: a full MaxBodyBytes body (8 MiB) takes 7 s at 10
		// Mbit/s; a client trickling its body (slowloris on the body) holds
		// its connection for at most this long after its headers.
		BodyTimeout: time.Minute,
		// 30 seconds a write: a client that reads nothing for that long
		// while its reply is ready has gone, or is holding a generation
		// slot on purpose; streams of any length are not cut.
		WriteTimeout: 30 * time.Second,
		// 2 minutes: longer than the 90 s Go's HTTP client (and most
		// others) keeps an idle connection, so the client closes first and
		// never sends a request on a connection the server is closing; an
		// abandoned connection is freed.
		IdleTimeout: 2 * time.Minute,
		// 256: far more than one user's apps and browser tabs open (a
		// browser keeps 6 per host), well below the usual 1024 open-file
		// limit that the p2p host shares; each connection costs a goroutine
		// and ~8 KiB of buffers.
		MaxConnections: 256,
		// 16 bytes a token: text averages about 4 bytes a token in the
		// models' tokenizers, so a prompt over 16 x the context does not
		// fit and is refused before it costs seconds of tokenizing (an
		// 8 MiB prompt took 2.65 s of CPU). Only a prompt made mostly of
		// tokens longer than 16 bytes (long runs of spaces or punctuation)
		// could fit and still be refused; raise it for such inputs.
		MaxPromptBytesPerToken: 16,
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
	case c.RequestTimeout < 0 || c.ReadHeaderTimeout < 0 || c.ShutdownTimeout < 0 || c.RetryAfter < 0 ||
		c.BodyTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0:
		return errors.New("node: timeouts must be >= 0")
	case c.MaxConnections < 0:
		return fmt.Errorf("node: MaxConnections must be >= 0, got %d", c.MaxConnections)
	case c.MaxPromptBytesPerToken < 0:
		return fmt.Errorf("node: MaxPromptBytesPerToken must be >= 0, got %d", c.MaxPromptBytesPerToken)
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
