package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// pipeListener is a net.Listener whose connections are net.Pipe pairs.
// Inside a synctest bubble their deadlines run on the bubble's clock, so a
// test drives the server's timeouts without sleeping. dial never blocks:
// the server end waits in a backlog until Accept takes it, as a TCP
// connection waits in the kernel's.
type pipeListener struct {
	backlog  chan net.Conn
	done     chan struct{}
	once     sync.Once
	accepted atomic.Int64
}

func newPipeListener() *pipeListener {
	return &pipeListener{backlog: make(chan net.Conn, 1024), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.backlog:
		l.accepted.Add(1)
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is loopback, so Serve needs no token and checks Host as it does on
// 127.0.0.1.
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 11435} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.backlog <- server
	return client
}

// pipeServer runs srv.Serve on a pipeListener until the test ends.
func pipeServer(t *testing.T, cfg Config, gen Generator) *pipeListener {
	t.Helper()
	srv, err := NewServer(cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}

// pipeClient is an http.Client whose connections come from ln.
func pipeClient(t *testing.T, ln *pipeListener) *http.Client {
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return ln.dial(), nil }}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

const requestHead = "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1:11435\r\nContent-Type: application/json\r\n"

// A body trickled a byte every 3 s is cut with 408 once BodyTimeout has
// passed since the headers, and its connection is closed.
func TestSlowBodyIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		ln := pipeServer(t, cfg, newFakeEngine())
		c := ln.dial()
		defer c.Close()
		start := time.Now()
		quit := make(chan struct{})
		defer close(quit)
		go func() {
			if _, err := io.WriteString(c, requestHead+"Content-Length: 100000\r\n\r\n{"); err != nil {
				return
			}
			for range 2000 { // at most 100 minutes
				select {
				case <-time.After(3 * time.Second):
				case <-quit:
					return
				}
				if _, err := c.Write([]byte(" ")); err != nil {
					return // the server closed the connection
				}
			}
		}()
		_ = c.SetReadDeadline(start.Add(30 * time.Minute))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a trickled body within 30 minutes: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %d %s, want 408", resp.StatusCode, body)
		}
		// The bound: BodyTimeout, plus one trickle interval for the read
		// in flight to see the deadline.
		if limit := cfg.BodyTimeout + 3*time.Second; took > limit {
			t.Errorf("cut after %v, want within %v", took, limit)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("connection still open after the 408: %v", err)
		}
	})
}

// A body that arrives in time is served, whatever its pace within the
// bound; and its deadline does not outlive it (the reply is not cut).
func TestBodyWithinTimeoutServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		ln := pipeServer(t, cfg, newFakeEngine())
		c := ln.dial()
		defer c.Close()
		body := `{"model":"stories260K","prompt":"hi","stream":false}`
		go func() {
			_, _ = fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n", requestHead, len(body))
			for i := range len(body) { // the whole body over about half the bound
				time.Sleep(cfg.BodyTimeout / time.Duration(2*len(body)))
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "Once upon") {
			t.Fatalf("status %d %s", resp.StatusCode, b)
		}
	})
}

// An idle keep-alive connection is closed after IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		ln := pipeServer(t, cfg, newFakeEngine())
		c := ln.dial()
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:11435\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		_, _ = io.ReadAll(resp.Body)
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(time.Hour))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("idle connection: read gave %v, want EOF (closed by the server)", err)
		}
		if took := time.Since(start); took > cfg.IdleTimeout+time.Second {
			t.Errorf("closed after %v idle, want within %v", took, cfg.IdleTimeout)
		}
	})
}

// A client that stops reading a stream loses it after WriteTimeout: the
// write fails and the generation is cancelled, freeing its slot.
func TestStalledReaderLosesStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		eng := newFakeEngine()
		eng.block, eng.started, eng.cancelled = true, make(chan struct{}, 1), make(chan error, 1)
		ln := pipeServer(t, cfg, eng)
		c := ln.dial()
		defer c.Close()
		body := `{"model":"stories260K","prompt":"hi"}`
		if _, err := fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", requestHead, len(body), body); err != nil {
			t.Fatal(err)
		}
		<-eng.started
		start := time.Now()
		// The client reads nothing from here on.
		select {
		case err := <-eng.cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("generation ended with %v", err)
			}
		case <-time.After(time.Hour):
			t.Fatal("a client that reads nothing still holds its generation after an hour")
		}
		if took := time.Since(start); took > cfg.WriteTimeout+time.Second {
			t.Errorf("cancelled after %v, want within WriteTimeout %v", took, cfg.WriteTimeout)
		}
	})
}

// slowEngine emits pieces gap apart: a reply that takes longer than every
// connection timeout but RequestTimeout.
type slowEngine struct {
	*fakeEngine
	pieces int
	gap    time.Duration
}

func (e *slowEngine) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	for range e.pieces {
		select {
		case <-time.After(e.gap):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := emit(infer.Piece{Text: " tok", Tokens: 1}); err != nil {
			return nil, err
		}
	}
	return &infer.Result{PromptTokens: len(req.Prompt), GeneratedTokens: e.pieces, FinishReason: infer.FinishStop}, nil
}

// Streams and replies longer than BodyTimeout, WriteTimeout and
// IdleTimeout (here 8 minutes) are not cut while the client reads.
func TestLongRepliesOutliveConnectionTimeouts(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				eng := &slowEngine{fakeEngine: newFakeEngine(), pieces: 16, gap: 30 * time.Second}
				if total := time.Duration(eng.pieces) * eng.gap; total < 2*max(cfg.BodyTimeout, cfg.WriteTimeout, cfg.IdleTimeout) || total >= cfg.RequestTimeout {
					t.Fatalf("reply of %v does not test the timeouts", total)
				}
				ln := pipeServer(t, cfg, eng)
				client := pipeClient(t, ln)
				start := time.Now()
				resp, err := client.Post("http://127.0.0.1:11435/api/generate", "application/json",
					strings.NewReader(fmt.Sprintf(`{"model":"stories260K","prompt":"hi","stream":%v}`, stream)))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("reply cut after %v: %v", time.Since(start), err)
				}
				if resp.StatusCode != 200 || strings.Count(string(b), " tok") != eng.pieces || strings.Contains(string(b), "error") {
					t.Fatalf("after %v: status %d %s", time.Since(start), resp.StatusCode, b)
				}
			})
		})
	}
}

// Serve holds at most MaxConnections connections: the next one waits until
// one closes.
func TestConnectionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MaxConnections = 2
		ln := pipeServer(t, cfg, newFakeEngine())
		healthz := func(c net.Conn) error {
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:11435\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			_, err = io.ReadAll(resp.Body)
			return err
		}
		var open []net.Conn
		for range cfg.MaxConnections {
			c := ln.dial()
			defer c.Close()
			if err := healthz(c); err != nil {
				t.Fatal(err)
			}
			open = append(open, c)
		}
		extra := ln.dial()
		defer extra.Close()
		served := make(chan error, 1)
		go func() { served <- healthz(extra) }()
		synctest.Wait()
		select {
		case err := <-served:
			t.Fatalf("connection %d served (%v) while %d were open", cfg.MaxConnections+1, err, cfg.MaxConnections)
		default:
		}
		if n := ln.accepted.Load(); n != int64(cfg.MaxConnections) {
			t.Errorf("accepted %d connections, limit %d", n, cfg.MaxConnections)
		}
		open[0].Close()
		synctest.Wait()
		select {
		case err := <-served:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the waiting connection was not served after one closed")
		}
	})
}

// countingEngine records the longest text it was asked to tokenize.
type countingEngine struct {
	*fakeEngine
	longest atomic.Int64
}

func (e *countingEngine) Tokenize(text string) ([]int32, error) {
	if n := int64(len(text)); n > e.longest.Load() {
		e.longest.Store(n)
	}
	return e.fakeEngine.Tokenize(text)
}

// A prompt longer than MaxPromptBytesPerToken x the context is a 400
// before the tokenizer sees it; a long chat is still truncated to fit, and
// the tokenizer never sees its whole history.
func TestPromptBytesCheckedBeforeTokenizing(t *testing.T) {
	cfg := DefaultConfig()
	eng := &countingEngine{fakeEngine: newFakeEngine()}
	srv, err := NewServer(cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	base := httptestServer(t, srv.Handler())
	limit := int64(cfg.MaxPromptBytesPerToken * eng.info.ContextLength)
	long := strings.Repeat("a", int(limit)+1)
	refused := []struct{ path, body string }{
		{"/api/generate", `{"model":"stories260K","raw":true,"prompt":"` + long + `"}`},
		{"/api/generate", `{"model":"stories260K","prompt":"` + long + `"}`},
		{"/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"` + long + `"}]}`},
		{"/api/chat", `{"model":"stories260K","truncate":false,"messages":[{"role":"user","content":"` + long + `"}]}`},
		{"/v1/completions", `{"model":"stories260K","prompt":"` + long + `"}`},
		{"/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"` + long + `"}]}`},
		{"/v1/responses", `{"model":"stories260K","input":"` + long + `"}`},
	}
	for _, c := range refused {
		eng.longest.Store(0)
		status, _, body := post(t, base, c.path, c.body)
		if status != 400 || !strings.Contains(string(body), "bytes") {
			t.Errorf("%s: %d %s, want 400 naming the bytes", c.path, status, body)
		}
		if n := eng.longest.Load(); n > limit {
			t.Errorf("%s: tokenized %d bytes, more than the %d bound", c.path, n, limit)
		}
	}
	// A chat history far over the bound whose last messages fit: truncated
	// as before, without tokenizing the whole of it.
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"message %d %s"}`, i, strings.Repeat("b", 100)))
	}
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		eng.longest.Store(0)
		status, hdr, body := post(t, base, path, `{"model":"stories260K","stream":false,"messages":[`+strings.Join(msgs, ",")+`]}`)
		if status != 200 || hdr.Get(headerTruncated) == "" || hdr.Get(headerTruncated) == "0" {
			t.Errorf("%s: long chat: %d truncated=%q %s", path, status, hdr.Get(headerTruncated), body)
		}
		if n := eng.longest.Load(); n > limit {
			t.Errorf("%s: tokenized %d bytes of a long chat, more than the %d bound", path, n, limit)
		}
	}
}

func TestConfigConnectionLimits(t *testing.T) {
	d := DefaultConfig()
	if d.BodyTimeout <= 0 || d.WriteTimeout <= 0 || d.IdleTimeout <= 0 || d.MaxConnections <= 0 || d.MaxPromptBytesPerToken <= 0 {
		t.Errorf("a connection bound is off by default: %+v", d)
	}
	for name, mod := range map[string]func(*Config){
		"body":        func(c *Config) { c.BodyTimeout = -1 },
		"write":       func(c *Config) { c.WriteTimeout = -1 },
		"idle":        func(c *Config) { c.IdleTimeout = -1 },
		"connections": func(c *Config) { c.MaxConnections = -1 },
		"bytes":       func(c *Config) { c.MaxPromptBytesPerToken = -1 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkLongPromptRefused is what an 8 MiB prompt costs now: reading,
// checking and decoding the body, then the byte check; the tokenizer does
// not run (it took 2.65 s of CPU on such a prompt before the check).
func BenchmarkLongPromptRefused(b *testing.B) {
	cfg := DefaultConfig()
	eng := &countingEngine{fakeEngine: newFakeEngine()}
	srv, err := NewServer(cfg, eng)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"model":"stories260K","raw":true,"prompt":"` + strings.Repeat("a", int(cfg.MaxBodyBytes)-100) + `"}`
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:11435/api/generate", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || eng.longest.Load() != 0 {
			b.Fatalf("status %d, tokenized %d bytes", rec.Code, eng.longest.Load())
		}
	}
}
