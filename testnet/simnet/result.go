package simnet

import (
	"slices"
	"time"
)

// Result is the metrics of one run. Times are in seconds.
type Result struct {
	Policy   string `json:"policy"`
	Requests int    `json:"requests"`

	MeanLatency float64 `json:"mean_latency_s"`
	P50Latency  float64 `json:"p50_latency_s"`
	P99Latency  float64 `json:"p99_latency_s"`
	MeanTTFT    float64 `json:"mean_ttft_s"`
	P50TTFT     float64 `json:"p50_ttft_s"`
	P99TTFT     float64 `json:"p99_ttft_s"`
	// HitRate is token-level: cached prompt tokens / prompt tokens.
	// RequestHitRate is request-level: requests that reused at least one
	// block.
	HitRate        float64 `json:"hit_rate"`
	RequestHitRate float64 `json:"request_hit_rate"`
	// Forwarded is the fraction of requests served by a peer other than
	// their entry peer; Refusals counts busy answers and failed forwards.
	Forwarded float64 `json:"forwarded"`
	Refusals  int     `json:"refusals"`
	// MaxShare is the largest fraction of all requests one peer served;
	// PeakWindowShare the largest in any window of WindowSeconds;
	// Shares[w][p] the fraction peer p served of window w's requests (by
	// arrival).
	MaxShare        float64     `json:"max_share"`
	PeakWindowShare float64     `json:"peak_window_share"`
	WindowSeconds   float64     `json:"window_s"`
	Shares          [][]float64 `json:"-"`
	// GossipBytesPerPeerSec is the gossip (digests, loads, snapshot pulls)
	// each peer received per second of the run, on average.
	GossipBytesPerPeerSec float64 `json:"gossip_bytes_per_peer_s"`
	// DecideMicros is the mean wall-clock CPU time of one routing decision.
	DecideMicros float64 `json:"decide_us"`
	// VirtualSeconds is the run's simulated span, WallSeconds what it took.
	VirtualSeconds float64 `json:"virtual_s"`
	WallSeconds    float64 `json:"wall_s"`
	Events         int     `json:"events"`
	// Errors counts gossip messages a mesh rejected (0 in a healthy run).
	Errors int `json:"errors"`

	Records []Record `json:"-"`
}

func (c *Cluster) result(wallTime time.Duration) *Result {
	r := &Result{Policy: c.policy.Name(), Requests: len(c.recs), Records: c.recs, Events: c.l.events,
		WallSeconds: wallTime.Seconds(), Errors: c.errs}
	Summarize(r, c.recs, len(c.peers), blockSize(c), c.cfg.Window)
	var gossip int64
	for _, p := range c.peers {
		gossip += p.gossipB
	}
	if r.VirtualSeconds > 0 {
		r.GossipBytesPerPeerSec = float64(gossip) / float64(len(c.peers)) / r.VirtualSeconds
	}
	return r
}

// Summarize fills r's request metrics from recs: latency and TTFT
// statistics, hit rates (a request hits when at least block tokens were
// cached), forwarding, traffic shares over windows of window (0: a
// twentieth of the span), and decision time.
func Summarize(r *Result, recs []Record, peers, block int, window time.Duration) {
	n := len(recs)
	if n == 0 {
		return
	}
	lat := make([]float64, n)
	ttft := make([]float64, n)
	var prompt, cached, hits, fwd, refused int
	var decide time.Duration
	var end time.Duration
	served := make([]int, peers)
	for i, rc := range recs {
		lat[i] = (rc.Done - rc.Arrive).Seconds()
		ttft[i] = (rc.First - rc.Arrive).Seconds()
		prompt += rc.Prompt
		cached += rc.Cached
		if rc.Cached >= block {
			hits++
		}
		if rc.Server != rc.Entry {
			fwd++
		}
		refused += rc.Attempts
		if rc.Forwarded {
			refused--
		}
		decide += rc.Decide
		end = max(end, rc.Done)
		served[rc.Server]++
	}
	r.MeanLatency, r.P50Latency, r.P99Latency = stats(lat)
	r.MeanTTFT, r.P50TTFT, r.P99TTFT = stats(ttft)
	if prompt > 0 {
		r.HitRate = float64(cached) / float64(prompt)
	}
	r.RequestHitRate = float64(hits) / float64(n)
	r.Forwarded = float64(fwd) / float64(n)
	r.Refusals = refused
	r.DecideMicros = float64(decide) / float64(n) / 1e3
	r.VirtualSeconds = end.Seconds()
	for _, s := range served {
		r.MaxShare = max(r.MaxShare, float64(s)/float64(n))
	}
	if window <= 0 {
		window = max(end/20, time.Millisecond)
	}
	r.WindowSeconds = window.Seconds()
	nw := int(end/window) + 1
	counts := make([][]int, nw)
	for i := range counts {
		counts[i] = make([]int, peers)
	}
	for _, rc := range recs {
		counts[min(int(rc.Arrive/window), nw-1)][rc.Server]++
	}
	r.Shares = make([][]float64, nw)
	for w, row := range counts {
		tot := 0
		for _, v := range row {
			tot += v
		}
		r.Shares[w] = make([]float64, peers)
		for p, v := range row {
			if tot > 0 {
				r.Shares[w][p] = float64(v) / float64(tot)
			}
		}
		// A window with few requests says little about balance.
		if tot >= 4*peers || tot >= 20 {
			r.PeakWindowShare = max(r.PeakWindowShare, slices.Max(r.Shares[w]))
		}
	}
}

// stats returns the mean, median and 99th percentile (nearest rank) of xs.
func stats(xs []float64) (mean, p50, p99 float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s)), percentile(s, 0.50), percentile(s, 0.99)
}

// percentile is the nearest-rank percentile of sorted s.
func percentile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	k := int(q*float64(len(s))+0.999999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}
