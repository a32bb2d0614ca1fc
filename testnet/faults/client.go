package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meshllm/meshllm/testnet/sse"
)

// Ask is one completion request.
type Ask struct {
	Prompt    string
	MaxTokens int
	// Stream asks for server-sent events; the answer is complete only when
	// the stream ends with a finish reason, the usage and [DONE].
	Stream bool
	// OnFirstPiece, when set, is called once as the first text of a
	// stream arrives (a fault injector's cue).
	OnFirstPiece func()
}

// Answer is what the client got.
type Answer struct {
	Text             string
	FinishReason     string
	CompletionTokens int
	PromptTokens     int
	CachedTokens     int
	// FirstPiece is when the first text arrived (streams only).
	FirstPiece time.Duration
	// MaxGap is the longest wait between two pieces of a stream: what a
	// fault mid-stream costs the client.
	MaxGap  time.Duration
	Latency time.Duration
}

// Complete checks that the answer is whole: a finish reason of "stop" or
// "length", and for "length" exactly the tokens asked for. A reply cut
// short by a fault fails it.
func (a Answer) Complete(ask Ask) error {
	switch {
	case a.FinishReason != "stop" && a.FinishReason != "length":
		return fmt.Errorf("finish reason %q", a.FinishReason)
	case a.FinishReason == "length" && ask.MaxTokens > 0 && a.CompletionTokens != ask.MaxTokens:
		return fmt.Errorf("finish reason length after %d of %d tokens", a.CompletionTokens, ask.MaxTokens)
	case a.CompletionTokens > 0 && a.Text == "":
		return fmt.Errorf("%d tokens but no text", a.CompletionTokens)
	}
	return nil
}

// Complete sends ask to the peer at httpAddr's /v1/completions (greedy
// sampling, so answers are comparable) and returns the answer, or an error
// for anything short of a whole one.
func Complete(ctx context.Context, client *http.Client, httpAddr string, ask Ask) (Answer, error) {
	body, _ := json.Marshal(map[string]any{
		"model": "stories260K", "prompt": ask.Prompt, "max_tokens": ask.MaxTokens,
		"temperature": 0, "stream": ask.Stream,
		"stream_options": map[string]bool{"include_usage": true},
	})
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return Answer{}, fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var a Answer
	if ask.Stream {
		a, err = readStream(resp.Body, start, ask.OnFirstPiece)
	} else {
		var c sse.Chunk // a whole completion reads as one chunk
		if err = json.NewDecoder(resp.Body).Decode(&c); err == nil {
			a = fold(a, c)
		}
	}
	a.Latency = time.Since(start)
	if err != nil {
		return a, err
	}
	if err := a.Complete(ask); err != nil {
		return a, fmt.Errorf("incomplete answer: %w", err)
	}
	return a, nil
}

func fold(a Answer, c sse.Chunk) Answer {
	for _, ch := range c.Choices {
		a.Text += ch.Text
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.FinishReason = *ch.FinishReason
		}
	}
	if u := c.Usage; u != nil {
		a.PromptTokens, a.CompletionTokens, a.CachedTokens = u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens
	}
	return a
}

// readStream reads server-sent completion chunks until [DONE].
func readStream(r io.Reader, start time.Time, onFirst func()) (Answer, error) {
	var a Answer
	var last time.Time
	err := sse.Read(r, func(c sse.Chunk) error {
		before := len(a.Text)
		a = fold(a, c)
		if len(a.Text) == before {
			return nil
		}
		now := time.Now()
		if !last.IsZero() {
			a.MaxGap = max(a.MaxGap, now.Sub(last))
		}
		last = now
		if a.FirstPiece == 0 {
			a.FirstPiece = time.Since(start)
			if onFirst != nil {
				onFirst()
			}
		}
		return nil
	})
	return a, err
}

// BearerClient is an HTTP client that sends token as the bearer token of
// every request, for peers whose API requires one.
func BearerClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
