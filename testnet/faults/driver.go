package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Result is one request the Driver sent.
type Result struct {
	Worker int
	Seq    int
	Target string // the HTTP address it went to
	Start  time.Time
	Answer Answer
	Err    error
}

// End is when the request finished.
func (r Result) End() time.Time { return r.Start.Add(r.Answer.Latency) }

// Driver sends a steady, closed-loop stream of requests: each of Workers
// goroutines sends its next request as soon as the previous one answered
// (after Pause). Every request must come back whole; any error counts as a
// failure. Safe for concurrent use once Run has started.
type Driver struct {
	// Workers is how many requests are in flight at once (default 1).
	Workers int
	// Target picks the peer (HTTP address) for the next request; it must
	// return a peer the fault does not hit.
	Target func(worker, seq int) string
	// Ask builds the next request.
	Ask func(worker, seq int) Ask
	// Pause is the wait between a worker's requests.
	Pause time.Duration
	// Timeout bounds one request (default 2 min): a request that hangs is
	// a failure, not a hung test.
	Timeout time.Duration
	// Client, when set, sends the requests (e.g. one that adds a bearer
	// token); by default each Run has its own.
	Client *http.Client
	// Done, when set, is called with each result as it comes in (e.g. to
	// release the target Target picked).
	Done func(Result)

	mu      sync.Mutex
	results []Result
	notify  chan struct{}
}

// Run sends requests until ctx ends, then returns every result.
func (d *Driver) Run(ctx context.Context) []Result {
	workers := max(d.Workers, 1)
	timeout := d.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	// One transport per driver: keep-alive connections to the surviving
	// peers, and no connection reuse across a restarted peer's old port.
	client := d.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
		defer client.CloseIdleConnections()
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				target := d.Target(w, seq)
				ask := d.Ask(w, seq)
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
				start := time.Now()
				a, err := Complete(rctx, client, target, ask)
				cancel()
				r := Result{Worker: w, Seq: seq, Target: target, Start: start, Answer: a, Err: err}
				if d.Done != nil {
					d.Done(r)
				}
				d.add(r)
				if d.Pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(d.Pause):
					}
				}
			}
		})
	}
	wg.Wait()
	return d.Results()
}

func (d *Driver) add(r Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.results = append(d.results, r)
	if d.notify != nil {
		close(d.notify)
		d.notify = nil
	}
}

// Results returns the results so far, in the order they finished.
func (d *Driver) Results() []Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.results)
}

// WaitResult blocks until a result that satisfies ok exists (looking at
// every result, old ones included), ctx ends, or d passes.
func (d *Driver) WaitResult(ctx context.Context, wait time.Duration, ok func(Result) bool) (Result, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	seen := 0
	for {
		d.mu.Lock()
		for ; seen < len(d.results); seen++ {
			if ok(d.results[seen]) {
				r := d.results[seen]
				d.mu.Unlock()
				return r, nil
			}
		}
		if d.notify == nil {
			d.notify = make(chan struct{})
		}
		ch := d.notify
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-deadline.C:
			return Result{}, fmt.Errorf("no matching result within %s", wait)
		}
	}
}

// Summary condenses results.
type Summary struct {
	Requests, Failures int
	// Errors are the first few failures, for the report.
	Errors        []string
	P50, P99, Max time.Duration
}

// Summarize counts results and failures and takes latency percentiles.
func Summarize(rs []Result) Summary {
	var s Summary
	lat := make([]time.Duration, 0, len(rs))
	for _, r := range rs {
		s.Requests++
		if r.Err != nil {
			s.Failures++
			if len(s.Errors) < 5 {
				s.Errors = append(s.Errors, fmt.Sprintf("worker %d #%d to %s: %v", r.Worker, r.Seq, r.Target, r.Err))
			}
			continue
		}
		lat = append(lat, r.Answer.Latency)
	}
	s.P50, s.P99, s.Max = Percentile(lat, 50), Percentile(lat, 99), Percentile(lat, 100)
	return s
}

// Percentile returns the p-th percentile (nearest rank) of ds; 0 when
// empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (s Summary) String() string {
	return fmt.Sprintf("%d requests, %d failed, p50 %s, p99 %s, max %s",
		s.Requests, s.Failures, s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond), s.Max.Round(time.Millisecond))
}
