package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/meshllm/meshllm/testnet/real"
	"github.com/meshllm/meshllm/testnet/workload"
)

// RealPolicy is the policy name of rows measured on running peers.
const RealPolicy = "meshllm-real"

// RunReal runs o's workload against the running peers of rc.Targets (see
// testnet/real) once per skew of o, and returns one row per skew with the
// policy RealPolicy. The peer count is the number of targets; o's link,
// cache, peers, profile-speed and policy axes do not apply (the peers are
// what they are), except that the workload is tokenized with the served
// model's vocabulary. rc.Window 0 reads the counters every twentieth of
// the arrival span; a negative one only before and after. Rows carry LinkMS 0 (loopback) and the model's name
// as Profile.
func RunReal(ctx context.Context, o Options, rc real.Config) (*Report, error) {
	if len(rc.Targets) == 0 {
		return nil, fmt.Errorf("bench: no targets")
	}
	o.Peers = []int{len(rc.Targets)}
	o.LinksMS, o.CacheTokens = []float64{0}, []int{0}
	o.Policies = []string{"local"} // validated but not run: the peers route
	if err := o.validate(); err != nil {
		return nil, err
	}
	if rc.Client == nil {
		rc.Client = &http.Client{}
	}
	m, err := real.Model(ctx, rc.Client, rc.Targets[0])
	if err != nil {
		return nil, fmt.Errorf("bench: asking %s for its model: %w", rc.Targets[0], err)
	}
	rc.Model = m.Name
	o.Profile.VocabSize = m.VocabSize
	var set *mmlu.Set
	if o.Workload == "mmlu" {
		if set, err = mmlu.Load(o.MMLUDir); err != nil {
			return nil, err
		}
	}
	rep := &Report{Scenario: o.Scenario, Options: o}
	for _, skew := range o.Skews {
		c := cell{skew: skew, peers: len(rc.Targets)}
		w, err := buildWorkload(o, set, c)
		if err != nil {
			return nil, err
		}
		if err := fitsContext(w, m); err != nil {
			return nil, err
		}
		cfg := rc
		if cfg.Window == 0 {
			cfg.Window = shareWindow(w)
		}
		start := time.Now()
		r, err := real.Run(ctx, cfg, w)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", skew, err)
		}
		rep.Rows = append(rep.Rows, Row{
			Policy: RealPolicy, Workload: o.Workload, Skew: skew.String(), Peers: c.peers,
			Requests: r.Requests, MeanLatency: r.MeanLatency, P50Latency: r.P50Latency, P99Latency: r.P99Latency,
			MeanTTFT: r.MeanTTFT, HitRate: r.HitRate, RequestHitRate: r.RequestHitRate, Forwarded: r.Forwarded,
			MaxShare: r.MaxShare, P50TTFT: r.P50TTFT, P99TTFT: r.P99TTFT, PeakWindowShare: r.PeakWindowShare,
			Profile: m.Name, Failed: r.Failed, VirtualSec: r.VirtualSeconds, WallSec: time.Since(start).Seconds(),
			Shares: r.Shares, WindowSeconds: r.WindowSeconds,
		})
	}
	return rep, nil
}

// shareWindow is the counter-reading interval of a real run when none is
// given: a twentieth of the open-loop arrival span (the simulated
// harness's windows), at least a second; 5 s for closed-loop clients.
func shareWindow(w *workload.Workload) time.Duration {
	var span time.Duration
	for _, s := range w.Sessions {
		span = max(span, s.Start)
	}
	if w.Clients > 0 || span <= 0 {
		return 5 * time.Second
	}
	return max(span/20, time.Second)
}

// fitsContext reports a workload whose longest request does not fit the
// served model's context (the peers would refuse it).
func fitsContext(w *workload.Workload, m real.ModelInfo) error {
	if m.ContextLength <= 0 {
		return nil
	}
	for _, r := range w.Requests {
		if n := len(r.Prompt) + max(len(r.Reply), 1); n > m.ContextLength {
			return fmt.Errorf("bench: a %d-token request does not fit %s's %d-token context: start the peers with a larger --ctx",
				n, m.Name, m.ContextLength)
		}
	}
	return nil
}
