package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/meshllm/meshllm/node"
)

// Usage is the usage block of an OpenAI completion.
type Usage struct {
	PromptTokens       int `json:"prompt_tokens"`
	CompletionTokens   int `json:"completion_tokens"`
	PromptTokenDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// do sends one authenticated request to a published peer and decodes a
// JSON answer into out (when not nil); the body of any non-200 answer is
// the error.
func (m *Mesh) do(ctx context.Context, svc, method, path string, body, out any) ([]byte, error) {
	addr, ok := m.HTTP[svc]
	if !ok {
		return nil, fmt.Errorf("compose: %s publishes no HTTP port", svc)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s via %s: %s: %s", method, path, svc, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s via %s: %w", method, path, svc, err)
		}
	}
	return b, nil
}

// Complete sends a greedy OpenAI completion of prompt through svc.
func (m *Mesh) Complete(ctx context.Context, svc, prompt string, maxTokens int) (Usage, error) {
	var resp struct {
		Usage Usage `json:"usage"`
	}
	_, err := m.do(ctx, svc, http.MethodPost, "/v1/completions", map[string]any{
		"model": "stories260K", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
	}, &resp)
	return resp.Usage, err
}

// Status reads svc's GET /v1/mesh?recent=1.
func (m *Mesh) Status(ctx context.Context, svc string) (node.MeshStatus, error) {
	var st node.MeshStatus
	_, err := m.do(ctx, svc, http.MethodGet, "/v1/mesh?recent=1", nil, &st)
	return st, err
}

// Metrics reads svc's GET /metrics (Prometheus text format).
func (m *Mesh) Metrics(ctx context.Context, svc string) (string, error) {
	b, err := m.do(ctx, svc, http.MethodGet, "/metrics", nil, nil)
	return string(b), err
}

// Metric sums the samples in a Prometheus text exposition whose line
// starts with prefix (a name, optionally with the start of its labels).
func Metric(exposition, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
			sum += v
		}
	}
	return sum
}
