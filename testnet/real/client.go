package real

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meshllm/meshllm/testnet/sse"
)

// completionBody is the request Run sends: the prompt as token IDs, a
// streamed reply with usage at the end, greedy sampling.
type completionBody struct {
	Model         string  `json:"model"`
	Prompt        []int32 `json:"prompt"`
	MaxTokens     int     `json:"max_tokens"`
	Temperature   float64 `json:"temperature"`
	Stream        bool    `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// reply is what one request measured, times from its send.
type reply struct {
	first, done    time.Duration
	prompt, cached int
}

// complete sends one streamed completion to base and reads it to the end.
// now is the clock the times are taken from.
func complete(ctx context.Context, hc *http.Client, now func() time.Time, base, model string, prompt []int32, maxTokens int) (reply, error) {
	body := completionBody{Model: model, Prompt: prompt, MaxTokens: max(maxTokens, 1), Stream: true}
	body.StreamOptions.IncludeUsage = true
	b, err := json.Marshal(body)
	if err != nil {
		return reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := now()
	resp, err := hc.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return reply{}, fmt.Errorf("%s: %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
	}
	var r reply
	gotFirst, gotUsage := false, false
	err = sse.Read(resp.Body, func(c sse.Chunk) error {
		if len(c.Choices) > 0 && !gotFirst {
			r.first, gotFirst = now().Sub(start), true
		}
		if c.Usage != nil {
			r.prompt, r.cached, gotUsage = c.Usage.PromptTokens, c.Usage.PromptTokensDetails.CachedTokens, true
		}
		return nil
	})
	if err != nil && !errors.Is(err, sse.ErrNoDone) { // the checks below judge a stream cut short
		return reply{}, fmt.Errorf("%s: reading stream: %w", base, err)
	}
	r.done = now().Sub(start)
	if !gotFirst || !gotUsage {
		return reply{}, fmt.Errorf("%s: stream ended without a reply piece and usage", base)
	}
	return r, nil
}

// ModelInfo is what Run needs to know of the model the peers serve.
type ModelInfo struct {
	Name          string
	VocabSize     int
	ContextLength int
}

// Model asks the peer at base which model it serves (GET /v1/models) and
// its vocabulary (POST /api/show, meshllm.vocab_size).
func Model(ctx context.Context, hc *http.Client, base string) (ModelInfo, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, hc, http.MethodGet, base+"/v1/models", nil, &list); err != nil {
		return ModelInfo{}, err
	}
	if len(list.Data) == 0 {
		return ModelInfo{}, fmt.Errorf("%s serves no model", base)
	}
	m := ModelInfo{Name: list.Data[0].ID}
	var show struct {
		ModelInfo map[string]any `json:"model_info"`
	}
	body, _ := json.Marshal(map[string]string{"model": m.Name})
	if err := getJSON(ctx, hc, http.MethodPost, base+"/api/show", body, &show); err != nil {
		return m, err
	}
	if v, ok := show.ModelInfo["meshllm.vocab_size"].(float64); ok {
		m.VocabSize = int(v)
	}
	if v, ok := show.ModelInfo["meshllm.context_length"].(float64); ok {
		m.ContextLength = int(v)
	}
	if m.VocabSize <= 0 {
		return m, fmt.Errorf("%s/api/show: no meshllm.vocab_size", base)
	}
	return m, nil
}

func getJSON(ctx context.Context, hc *http.Client, method, url string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
