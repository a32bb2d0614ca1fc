// Package sse reads the server-sent event stream of an OpenAI streaming
// completion (`"stream": true` on /v1/completions), as a meshllm peer sends
// it: `data: {json}` events, an error event on failure, and `data: [DONE]`
// at the end. The demo, the real-mode bench and the fault tests all read
// peers' replies with it; each keeps its own request and what it measures.
//
// Concurrency: Read runs on the caller's goroutine; it has no state.
package sse

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Chunk is one completion event.
type Chunk struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Usage is the token accounting of the stream's last event.
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// ErrNoDone reports a stream that ended without `data: [DONE]`: the reply
// may be cut short.
var ErrNoDone = errors.New("stream ended without [DONE]")

// Read decodes the events of r and calls onChunk for each, until [DONE]. It
// fails on an undecodable event ("bad chunk"), an error event, onChunk's
// error, a read error, or ErrNoDone.
func Read(r io.Reader, onChunk func(Chunk) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return nil
		}
		var c Chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return fmt.Errorf("bad chunk %q: %w", data, err)
		}
		if c.Error != nil {
			return fmt.Errorf("stream error: %s", c.Error.Message)
		}
		if err := onChunk(c); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return ErrNoDone
}
