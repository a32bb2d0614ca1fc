package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// This file holds the bounds on what one client connection may cost: the
// body and write deadlines (Config.BodyTimeout, Config.WriteTimeout), the
// connection cap (Config.MaxConnections) and the byte bound on prompts
// checked before tokenizing (Config.MaxPromptBytesPerToken).
// Config.IdleTimeout and Config.ReadHeaderTimeout are http.Server's own.

// withDeadlines wraps h so that a request's body must arrive within
// BodyTimeout of its headers and each write to the client must complete
// within WriteTimeout. Both deadlines are set on the connection through
// http.ResponseController (a ResponseWriter that has none, such as a
// recorder in tests, is served without them):
//
//   - the body's read deadline runs from the end of the headers and is
//     lifted as soon as the body has been read to its end, so it never
//     touches the reply;
//   - the write deadline is renewed before every write and flush, and once
//     more when the handler returns (net/http flushes what is buffered
//     then), so a stream of any length keeps going while its client reads:
//     http.Server's WriteTimeout, one deadline for the whole response,
//     would cut every reply longer than it.
//
// Being part of the handler, both apply on whichever http.Server serves
// Handler, not only in Serve.
//
// The handler it returns is safe for concurrent use; each request's
// wrappers belong to that request's goroutine.
func (s *Server) withDeadlines(h http.Handler) http.Handler {
	body, write := s.cfg.BodyTimeout, s.cfg.WriteTimeout
	if body <= 0 && write <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if write > 0 {
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: write}
			// Also covers what net/http writes on its own before the
			// handler does (a 100 Continue while the body is read).
			dw.renew()
			defer dw.renew()
			w = dw
		}
		if body > 0 && r.Body != nil && r.Body != http.NoBody {
			if err := rc.SetReadDeadline(time.Now().Add(body)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineWriter renews the connection's write deadline before each write
// and flush. Unwrap lets http.ResponseController reach the writer below.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) renew() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.renew()
	return w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// deadlineBody lifts the connection's read deadline once the body has been
// read to its end. (net/http's background read, which watches for the
// client going away while the handler runs, starts as the body ends and
// clears the deadline itself in current Go releases; this does not rely
// on it.)
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimedOut reports whether a body read failed on its deadline.
func bodyTimedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// errBodyTimeout is the answer to a body that did not arrive within
// Config.BodyTimeout. Its connection is closed: the rest of the body
// would still be on its way.
func errBodyTimeout(w http.ResponseWriter) *apiError {
	w.Header().Set("Connection", "close")
	return &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
		message: "the request body did not arrive in time: send it at once after the headers"}
}

// limitListener holds at most cap(sem) accepted connections open at once
// (golang.org/x/net/netutil.LimitListener's behaviour): Accept waits for a
// slot before accepting, so connections beyond the cap wait in the listen
// backlog until one closes. Close unblocks a waiting Accept. It is safe for
// concurrent use.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn frees its listener slot on its first Close.
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite passes TCP's half-close through: net/http uses it to make
// sure a client reads an error answer (a 408, a 413) before the
// connection is reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// promptBytesError is a prompt refused for its length in bytes before it
// was tokenized (Config.MaxPromptBytesPerToken).
type promptBytesError struct {
	Bytes  int // the prompt's length
	Limit  int // the most bytes allowed
	Tokens int // the token bound the limit derives from
	api    *apiError
}

func (e *promptBytesError) Error() string { return e.api.message }

// Unwrap gives classify the 400 to answer with.
func (e *promptBytesError) Unwrap() error { return e.api }

// promptByteLimit is the longest prompt, in bytes, that a request whose
// context is ctx tokens may send to the tokenizer; 0 for no limit.
func (s *Server) promptByteLimit(ctx int) (limit, tokens int) {
	per := s.cfg.MaxPromptBytesPerToken
	if per <= 0 || ctx <= 0 {
		return 0, 0
	}
	tokens = ctx
	if mp := s.cfg.MaxPromptTokens; mp > 0 && mp < tokens {
		tokens = mp
	}
	return tokens * per, tokens
}

// checkPromptBytes refuses text longer than the byte limit of a context of
// ctx tokens; param names the request field for the OpenAI error.
func (s *Server) checkPromptBytes(text string, ctx int, param string) *promptBytesError {
	limit, tokens := s.promptByteLimit(ctx)
	if limit == 0 || len(text) <= limit {
		return nil
	}
	return &promptBytesError{Bytes: len(text), Limit: limit, Tokens: tokens, api: &apiError{
		status: http.StatusBadRequest, typ: typeInvalidRequest, param: param, code: "context_length_exceeded",
		message: fmt.Sprintf("prompt is %d bytes, more than the %d bytes (%d a token) that %d tokens can hold: shorten the prompt",
			len(text), limit, s.cfg.MaxPromptBytesPerToken, tokens)}}
}

// boundedTokenizer is a Generator whose Tokenize refuses text over the
// byte limit of a context of ctx tokens with a *promptBytesError, without
// tokenizing it; truncateChat treats that as a candidate that does not fit.
type boundedTokenizer struct {
	Generator
	s   *Server
	ctx int
}

func (b boundedTokenizer) Tokenize(text string) ([]int32, error) {
	if e := b.s.checkPromptBytes(text, b.ctx, "messages"); e != nil {
		return nil, e
	}
	return b.Generator.Tokenize(text)
}
