package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/meshllm/meshllm/node"
)

// apiTimeout bounds one read of a peer's status or metrics: a stopped peer
// must not hang the reader.
const apiTimeout = 3 * time.Second

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Mesh reads the peer's /v1/mesh; recent adds its recent routing
// decisions.
func (p *Peer) Mesh(ctx context.Context, recent bool) (node.MeshStatus, error) {
	var s node.MeshStatus
	url := "http://" + p.HTTP() + "/v1/mesh"
	if recent {
		url += "?recent=1"
	}
	return s, getJSON(ctx, url, &s)
}

// Knows reports whether p's mesh view holds peer id with a load and an
// RTT (withDigest: and a non-empty digest).
func (p *Peer) Knows(ctx context.Context, id string, withDigest bool) bool {
	s, err := p.Mesh(ctx, false)
	if err != nil {
		return false
	}
	for _, q := range s.Peers {
		if string(q.Peer) == id && q.Load != nil && q.RTTMillis != nil && (!withDigest || q.DigestBlocks > 0) {
			return true
		}
	}
	return false
}

// Sees reports whether p's mesh view holds peer id at all.
func (p *Peer) Sees(ctx context.Context, id string) bool {
	s, err := p.Mesh(ctx, false)
	if err != nil {
		return false
	}
	for _, q := range s.Peers {
		if string(q.Peer) == id {
			return true
		}
	}
	return false
}

// Metrics are the samples of a Prometheus text exposition, keyed by the
// metric line's name and labels as written (e.g.
// `meshllm_router_served_total{where="peer"}`).
type Metrics map[string]float64

// Sum adds the samples whose key starts with prefix.
func (m Metrics) Sum(prefix string) float64 {
	s := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// Metrics scrapes the peer's /metrics.
func (p *Peer) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.HTTP()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// WaitFor polls cond every 100 ms until it holds, ctx ends or d passes.
// Mesh convergence (DHT, gossip) has no event a process outside the peers
// could wait on; the deadlines callers pass are generous, so only a hang
// trips them.
func WaitFor(ctx context.Context, what string, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
