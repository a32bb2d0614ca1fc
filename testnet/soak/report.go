package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/meshllm/meshllm/testnet/faults"
)

// report is what a soak run found.
type report struct {
	Peers    int           `json:"peers"`
	Duration time.Duration `json:"duration_ns"`
	Seed     uint64        `json:"seed"`
	Requests int           `json:"requests"`
	Failures int           `json:"failures"`
	Errors   []string      `json:"errors,omitempty"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Minutes  []minute      `json:"minutes"`
	Faults   []faultEvent  `json:"faults"`
	Growth   []growth      `json:"growth"`
	Samples  []sample      `json:"samples"`
}

// minute is one minute of client traffic (by the request's start).
type minute struct {
	Minute             int           `json:"minute"`
	Requests, Failures int           `json:"-"`
	P50, P99, Max      time.Duration `json:"-"`
	Summary            string        `json:"summary"`
	// Peer 0 (never faulted) at the end of the minute.
	Goroutines float64 `json:"p0_goroutines"`
	RSS        float64 `json:"p0_rss_bytes"`
}

// growth is one peer process's runtime metrics from its first sample to
// its last.
type growth struct {
	Peer, Incarnation               int
	Span                            time.Duration
	GoroutinesFirst, GoroutinesLast float64
	GoroutinesMax                   float64
	RSSFirst, RSSLast               float64
	HeapFirst, HeapLast             float64
}

func newReport(cfg config, start time.Time, rs []faults.Result, evs []faultEvent, ss []sample) *report {
	sum := faults.Summarize(rs)
	r := &report{Peers: cfg.peers, Duration: cfg.duration, Seed: cfg.seed, Requests: sum.Requests, Failures: sum.Failures,
		Errors: sum.Errors, P50: sum.P50, P99: sum.P99, Max: sum.Max, Faults: evs, Samples: ss}
	byMinute := map[int][]faults.Result{}
	for _, res := range rs {
		k := int(res.Start.Sub(start) / time.Minute)
		byMinute[k] = append(byMinute[k], res)
	}
	for k := range int(cfg.duration/time.Minute) + 1 {
		if len(byMinute[k]) == 0 {
			continue
		}
		s := faults.Summarize(byMinute[k])
		m := minute{Minute: k, Requests: s.Requests, Failures: s.Failures, P50: s.P50, P99: s.P99, Max: s.Max, Summary: s.String()}
		for _, x := range ss {
			if x.Peer == 0 && int(x.At.Sub(start)/time.Minute) == k {
				m.Goroutines, m.RSS = x.Goroutines, x.RSS
			}
		}
		r.Minutes = append(r.Minutes, m)
	}
	type key struct{ peer, inc int }
	procs := map[key][]sample{}
	for _, s := range ss {
		procs[key{s.Peer, s.Incarnation}] = append(procs[key{s.Peer, s.Incarnation}], s)
	}
	for k, s := range procs {
		first, last := s[0], s[len(s)-1]
		g := growth{Peer: k.peer, Incarnation: k.inc, Span: last.At.Sub(first.At),
			GoroutinesFirst: first.Goroutines, GoroutinesLast: last.Goroutines,
			RSSFirst: first.RSS, RSSLast: last.RSS, HeapFirst: first.Heap, HeapLast: last.Heap}
		for _, x := range s {
			g.GoroutinesMax = max(g.GoroutinesMax, x.Goroutines)
		}
		r.Growth = append(r.Growth, g)
	}
	slices.SortFunc(r.Growth, func(a, b growth) int {
		if a.Peer != b.Peer {
			return a.Peer - b.Peer
		}
		return a.Incarnation - b.Incarnation
	})
	return r
}

func msf(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

func mib(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }

// print writes the report as Markdown.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "## soak: %d peers, %s, seed %d\n\n", r.Peers, r.Duration, r.Seed)
	fmt.Fprintf(w, "requests served: %d, failed: %d; latency p50 %s ms, p99 %s ms, max %s ms\n\n",
		r.Requests-r.Failures, r.Failures, msf(r.P50), msf(r.P99), msf(r.Max))
	for _, e := range r.Errors {
		fmt.Fprintf(w, "- failure: %s\n", e)
	}
	kinds := map[string]int{}
	for _, f := range r.Faults {
		kinds[f.Kind]++
	}
	fmt.Fprintf(w, "faults: %d (kill %d, term %d, freeze %d)\n\n", len(r.Faults), kinds["kill"], kinds["term"], kinds["freeze"])
	fmt.Fprintf(w, "| minute | requests | failed | p50 ms | p99 ms | max ms | p0 goroutines | p0 RSS MiB |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Minutes {
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s | %s | %.0f | %s |\n", m.Minute, m.Requests, m.Failures, msf(m.P50), msf(m.P99), msf(m.Max), m.Goroutines, mib(m.RSS))
	}
	fmt.Fprintf(w, "\n| peer | process | span s | goroutines first -> last (max) | RSS MiB first -> last | heap MiB first -> last |\n|---|---|---|---|---|---|\n")
	for _, g := range r.Growth {
		fmt.Fprintf(w, "| p%d | %d | %.0f | %.0f -> %.0f (%.0f) | %s -> %s | %s -> %s |\n", g.Peer, g.Incarnation, g.Span.Seconds(),
			g.GoroutinesFirst, g.GoroutinesLast, g.GoroutinesMax, mib(g.RSSFirst), mib(g.RSSLast), mib(g.HeapFirst), mib(g.HeapLast))
	}
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
