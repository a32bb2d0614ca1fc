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

// API reads a peer's status endpoints at Addr (host:port), with Token as
// the bearer token when the API requires one.
type API struct {
	Addr, Token string
}

func (a API) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.Addr+path, nil)
	if err != nil {
		return nil, err
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	return http.DefaultClient.Do(req)
}

func (a API) getJSON(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	resp, err := a.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// API is the peer's status API.
func (p *Peer) API() API { return API{Addr: p.HTTP()} }

// Mesh reads the peer's /v1/mesh; recent adds its recent routing
// decisions.
func (p *Peer) Mesh(ctx context.Context, recent bool) (node.MeshStatus, error) {
	return p.API().Mesh(ctx, recent)
}

// Knows is API.Knows on the peer.
func (p *Peer) Knows(ctx context.Context, id string, withDigest bool) bool {
	return p.API().Knows(ctx, id, withDigest)
}

// Sees is API.Sees on the peer.
func (p *Peer) Sees(ctx context.Context, id string) bool { return p.API().Sees(ctx, id) }

// Metrics is API.Metrics on the peer.
func (p *Peer) Metrics(ctx context.Context) (Metrics, error) { return p.API().Metrics(ctx) }

// Mesh reads /v1/mesh; recent adds the recent routing decisions.
func (a API) Mesh(ctx context.Context, recent bool) (node.MeshStatus, error) {
	var s node.MeshStatus
	path := "/v1/mesh"
	if recent {
		path += "?recent=1"
	}
	return s, a.getJSON(ctx, path, &s)
}

// Knows reports whether the peer's mesh view holds peer id with a load
// and an RTT (withDigest: and a non-empty digest).
func (a API) Knows(ctx context.Context, id string, withDigest bool) bool {
	s, err := a.Mesh(ctx, false)
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

// Sees reports whether the peer's mesh view holds peer id at all.
func (a API) Sees(ctx context.Context, id string) bool {
	s, err := a.Mesh(ctx, false)
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

// Metrics scrapes /metrics.
func (a API) Metrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	resp, err := a.get(ctx, "/metrics")
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
