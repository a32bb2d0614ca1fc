package bench

import (
	"fmt"
	"sync"
	"time"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/meshllm/meshllm/testnet/simnet"
	"github.com/meshllm/meshllm/testnet/workload"
)

// Row is one policy's result in one cell. The JSON names of the first
// fields are `meshllm bench --json`'s contract.
type Row struct {
	Policy         string  `json:"policy"`
	Workload       string  `json:"workload"`
	Skew           string  `json:"skew"`
	Peers          int     `json:"peers"`
	LinkMS         float64 `json:"link_ms"`
	Requests       int     `json:"requests"`
	MeanLatency    float64 `json:"mean_latency_s"`
	P50Latency     float64 `json:"p50_latency_s"`
	P99Latency     float64 `json:"p99_latency_s"`
	MeanTTFT       float64 `json:"mean_ttft_s"`
	HitRate        float64 `json:"hit_rate"`
	RequestHitRate float64 `json:"request_hit_rate"`
	Forwarded      float64 `json:"forwarded"`
	MaxShare       float64 `json:"max_share"`
	GossipBytes    float64 `json:"gossip_bytes_per_peer_s"`

	P50TTFT         float64 `json:"p50_ttft_s"`
	P99TTFT         float64 `json:"p99_ttft_s"`
	PeakWindowShare float64 `json:"peak_window_share"`
	CacheTokens     int     `json:"cache_tokens"`
	Profile         string  `json:"profile"`
	Centralised     bool    `json:"centralised"`
	// VsLocal is the mean latency over local-only's in the same cell
	// (when local ran).
	VsLocal      float64 `json:"vs_local,omitempty"`
	Refusals     int     `json:"refusals"`
	DecideMicros float64 `json:"decide_us"`
	VirtualSec   float64 `json:"virtual_s"`
	WallSec      float64 `json:"wall_s"`
	// Failed counts requests that got an error (real runs only; they are
	// left out of the other figures).
	Failed int `json:"failed,omitempty"`

	// Shares[w][p] is peer p's traffic share in window w (plots, CSV).
	Shares        [][]float64 `json:"-"`
	WindowSeconds float64     `json:"-"`
}

// Report is an experiment's result.
type Report struct {
	Scenario string `json:"scenario"`
	Rows     []Row  `json:"rows"`
	// Options are what ran (not part of the JSON contract).
	Options Options `json:"-"`
}

type cell struct {
	skew  workload.Skew
	link  float64
	cache int
	peers int
}

// Run runs every cell of o under every policy. progress, when non-nil, is
// called after each run with the runs done and the total (from the
// calling goroutine of Run's workers, serialized).
func Run(o Options, progress func(done, total int)) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var set *mmlu.Set
	if o.Workload == "mmlu" {
		var err error
		if set, err = mmlu.Load(o.MMLUDir); err != nil {
			return nil, err
		}
	}
	var cells []cell
	for _, p := range o.Peers {
		for _, k := range o.Skews {
			for _, cs := range o.CacheTokens {
				for _, l := range o.LinksMS {
					cells = append(cells, cell{k, l, cs, p})
				}
			}
		}
	}
	type job struct {
		cell   int
		policy string
		w      *workload.Workload
	}
	var jobs []job
	for i, c := range cells {
		w, err := buildWorkload(o, set, c)
		if err != nil {
			return nil, err
		}
		for _, p := range o.Policies {
			jobs = append(jobs, job{i, p, w})
		}
	}
	rows := make([]Row, len(jobs))
	errs := make([]error, len(jobs))
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range o.workers() {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				rows[i], errs[i] = runOne(o, cells[j.cell], j.policy, j.w)
				mu.Lock()
				done++
				if progress != nil {
					progress(done, len(jobs))
				}
				mu.Unlock()
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// Ratios to local-only in each cell.
	for i := range rows {
		for k := range rows {
			if jobs[k].cell == jobs[i].cell && rows[k].Policy == "local" && rows[k].MeanLatency > 0 {
				rows[i].VsLocal = rows[i].MeanLatency / rows[k].MeanLatency
			}
		}
	}
	return &Report{Scenario: o.Scenario, Rows: rows, Options: o}, nil
}

func rate(o Options, peers int) float64 {
	if o.Rate > 0 {
		return o.Rate
	}
	return 2 * float64(peers)
}

func buildWorkload(o Options, set *mmlu.Set, c cell) (*workload.Workload, error) {
	arr := workload.Arrivals{Rate: rate(o, c.peers), Clients: o.Clients}
	switch o.Workload {
	case "mmlu":
		return workload.MMLU(workload.MMLUConfig{Set: set, Requests: o.Requests, Skew: c.skew,
			Vocab: o.Profile.VocabSize, Peers: c.peers, Arrivals: arr, Seed: o.Seed})
	case "chat":
		return workload.Chat(workload.ChatConfig{Requests: o.Requests, Away: 0.2,
			Vocab: o.Profile.VocabSize, Peers: c.peers, Arrivals: arr, Seed: o.Seed})
	default:
		return workload.SharedPrefix(workload.SharedPrefixConfig{Requests: o.Requests, Skew: c.skew,
			Vocab: o.Profile.VocabSize, Peers: c.peers, Arrivals: arr, Seed: o.Seed})
	}
}

func runOne(o Options, c cell, policy string, w *workload.Workload) (Row, error) {
	p, err := simnet.NewPolicy(policy)
	if err != nil {
		return Row{}, err
	}
	cfg := simnet.Config{
		Peers: c.peers, Profile: o.Profile, CacheTokens: c.cache, Running: o.Running,
		Net: simnet.Network{Link: ms(c.link)}, Seed: o.Seed,
	}
	if o.SlowPeers > 0 && o.SlowFactor > 0 {
		cfg.Profiles = make([]sim.Profile, c.peers)
		slow := int(o.SlowPeers*float64(c.peers) + 0.5)
		for i := range cfg.Profiles {
			cfg.Profiles[i] = o.Profile
			if i < slow {
				cfg.Profiles[i] = slowed(o.Profile, o.SlowFactor)
			}
		}
	}
	if o.Churn > 0 {
		span := time.Duration(float64(o.Requests) / rate(o, c.peers) * float64(time.Second))
		n := max(1, int(o.Churn*float64(c.peers)))
		for i := range n {
			cfg.Churn = append(cfg.Churn, simnet.Churn{At: span / 3, Peer: c.peers - 1 - i},
				simnet.Churn{At: 2 * span / 3, Peer: c.peers - 1 - i, Up: true})
		}
	}
	r, err := simnet.Run(cfg, w, p)
	if err != nil {
		return Row{}, fmt.Errorf("%s %+v: %w", policy, c, err)
	}
	cache := c.cache
	if cache <= 0 {
		cache = o.Profile.WithDefaults().CacheCells
	}
	return Row{
		Policy: policy, Workload: o.Workload, Skew: c.skew.String(), Peers: c.peers, LinkMS: c.link,
		Requests: r.Requests, MeanLatency: r.MeanLatency, P50Latency: r.P50Latency, P99Latency: r.P99Latency,
		MeanTTFT: r.MeanTTFT, HitRate: r.HitRate, RequestHitRate: r.RequestHitRate, Forwarded: r.Forwarded,
		MaxShare: r.MaxShare, GossipBytes: r.GossipBytesPerPeerSec,
		P50TTFT: r.P50TTFT, P99TTFT: r.P99TTFT, PeakWindowShare: r.PeakWindowShare, CacheTokens: cache,
		Profile: o.Profile.Name, Centralised: p.Centralised(), Refusals: r.Refusals,
		DecideMicros: r.DecideMicros, VirtualSec: r.VirtualSeconds, WallSec: r.WallSeconds,
		Shares: r.Shares, WindowSeconds: r.WindowSeconds,
	}, nil
}
