package real

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Counters are the routing counters of one peer, read from its /metrics.
type Counters struct {
	// Local, Peer and Continued count the requests that entered at this
	// peer by where they were served (meshllm_router_served_total{where}).
	Local, Peer, Continued float64
	// ServedForOthers counts requests other peers forwarded here that this
	// peer served (meshllm_router_forwarded_in_total{outcome="served"}).
	ServedForOthers float64
}

// Entered is the requests that entered at the peer and finished.
func (c Counters) Entered() float64 { return c.Local + c.Peer + c.Continued }

// Served is the requests this peer's engine finished: its own entries kept
// local (or continued locally) plus the ones it served for others.
func (c Counters) Served() float64 { return c.Local + c.Continued + c.ServedForOthers }

// Sub returns c - o.
func (c Counters) Sub(o Counters) Counters {
	return Counters{Local: c.Local - o.Local, Peer: c.Peer - o.Peer, Continued: c.Continued - o.Continued,
		ServedForOthers: c.ServedForOthers - o.ServedForOthers}
}

// ParseCounters reads the routing counters from a Prometheus text
// exposition. Missing series count as zero (a counter vector shows no line
// before its first increment).
func ParseCounters(r io.Reader) (Counters, error) {
	var c Counters
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(line)
		if err != nil {
			return c, err
		}
		switch name {
		case "meshllm_router_served_total":
			switch labels["where"] {
			case "local":
				c.Local += value
			case "peer":
				c.Peer += value
			case "continued":
				c.Continued += value
			}
		case "meshllm_router_forwarded_in_total":
			if labels["outcome"] == "served" {
				c.ServedForOthers += value
			}
		}
	}
	return c, sc.Err()
}

// parseSample splits one sample line: name{k="v",...} value [timestamp].
func parseSample(line string) (name string, labels map[string]string, value float64, err error) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, fmt.Errorf("metrics: bad sample %q", line)
		}
		name, rest = line[:i], line[j+1:]
		labels = map[string]string{}
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return "", nil, 0, fmt.Errorf("metrics: bad label %q in %q", kv, line)
			}
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			labels[strings.TrimSpace(k)] = v
		}
	} else {
		name, rest, _ = strings.Cut(line, " ")
		rest = " " + rest
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, fmt.Errorf("metrics: no value in %q", line)
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("metrics: bad value in %q", line)
	}
	return name, labels, value, nil
}

// splitLabels splits k="v",k="v" at commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case escaped:
			escaped = false
		case ch == '\\':
			escaped = true
		case ch == '"':
			quoted = !quoted
		case ch == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// ScrapeCounters reads a peer's routing counters from base + "/metrics".
func ScrapeCounters(ctx context.Context, hc *http.Client, base string) (Counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return Counters{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Counters{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Counters{}, fmt.Errorf("%s/metrics: %s", base, resp.Status)
	}
	return ParseCounters(resp.Body)
}
