package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/testnet/simnet"
	"github.com/meshllm/meshllm/testnet/workload"
)

// Options is one experiment: the cross product of its lists is the grid of
// cells, and each cell runs under every policy.
type Options struct {
	// Scenario names the preset the options came from (reports show it).
	Scenario string
	// Workload is "mmlu", "chat" or "shared-prefix".
	Workload string
	// Skews, LinksMS (one-way link latency in ms), CacheTokens (KV capacity
	// per peer; 0: the profile's) and Peers are the grid's axes.
	Skews       []workload.Skew
	LinksMS     []float64
	CacheTokens []int
	Peers       []int
	// Requests per run; Rate the Poisson arrival rate (requests or, for
	// chat, conversations per second, for the whole mesh), or Clients > 0
	// closed-loop clients instead.
	Requests int
	Rate     float64
	Clients  int
	// Profile is the engine cost model; SlowPeers > 0 makes that fraction
	// of the peers SlowFactor times slower (heterogeneous peers).
	Profile    sim.Profile
	SlowPeers  float64
	SlowFactor float64
	// Running is how many requests an engine runs at once (simnet.Config).
	Running int
	// Churn > 0 makes that fraction of the peers leave at a third of the
	// run and come back (with empty caches) at two thirds.
	Churn float64
	// Policies to compare, in report order.
	Policies []string
	// MMLUDir holds the MMLU data (mmlu workload).
	MMLUDir string
	// Seed makes everything reproducible.
	Seed uint64
	// Workers runs that many simulations at once; 0 means GOMAXPROCS.
	Workers int
}

// Scenarios lists the named presets.
func Scenarios() []string {
	return []string{"paper", "latency", "skew", "cache", "hetero", "churn", "scale", "chat", "shared-prefix", "quick"}
}

// Scenario returns the preset options of name; flags then override them.
func Scenario(name string) (Options, error) {
	o := Options{
		Scenario: name, Workload: "mmlu", Skews: []workload.Skew{{Zipf: true, S: 1.1}},
		LinksMS: []float64{2}, CacheTokens: []int{HalfSubjects}, Peers: []int{4},
		Requests: 2000, Rate: 8, Profile: PaperProfile(), Running: 1,
		Policies: simnet.PolicyNames(), Seed: 1,
	}
	switch name {
	case "paper":
		o.Skews = []workload.Skew{workload.Uniform, {Zipf: true, S: 1.1}}
		o.LinksMS = []float64{2, 200, 1000}
	case "latency":
		o.LinksMS = []float64{0.5, 2, 10, 25, 50, 100, 200, 500, 1000}
	case "skew":
		o.Skews = []workload.Skew{workload.Uniform, {Zipf: true, S: 0.6}, {Zipf: true, S: 0.9}, {Zipf: true, S: 1.1}, {Zipf: true, S: 1.5}}
	case "cache":
		o.CacheTokens = []int{AllSubjects / 8, AllSubjects / 4, HalfSubjects, AllSubjects, 2 * AllSubjects}
	case "hetero":
		o.SlowPeers, o.SlowFactor = 0.5, 4
		o.Rate = 5
		o.LinksMS = []float64{2, 50}
	case "churn":
		o.Churn = 0.25
		o.Peers = []int{8}
		o.Rate = 16
		o.Requests = 3000
	case "scale":
		o.Peers = []int{16, 64, 256}
		o.Rate = 0 // scaled with the peers: 2 per peer per second
		o.Requests = 4000
		o.Policies = []string{"local", "round-robin", "consistent-hash", "sglang", "paper", "meshllm", "oracle"}
	case "chat":
		o.Workload = "chat"
		o.Skews = []workload.Skew{workload.Uniform}
		o.LinksMS = []float64{2, 50}
		o.Rate = 0.5
		o.CacheTokens = []int{16384}
	case "shared-prefix":
		o.Workload = "shared-prefix"
		o.LinksMS = []float64{2, 50}
		o.Rate = 4
		o.CacheTokens = []int{8192}
	case "quick":
		o.Requests = 300
		o.Skews = []workload.Skew{workload.Uniform, {Zipf: true, S: 1.1}}
		o.LinksMS = []float64{2, 1000}
	default:
		return o, fmt.Errorf("bench: unknown scenario %q (have %s)", name, strings.Join(Scenarios(), ", "))
	}
	return o, nil
}

// Cache sizes of the MMLU scenarios, in tokens: a subject's 5-shot prefix
// plus one question is about 590 tokens with the simulated tokenizer, so
// AllSubjects holds every subject's prefix with room for the questions, and
// HalfSubjects about half of them.
const (
	AllSubjects  = 57 * 700
	HalfSubjects = AllSubjects / 2
)

// validate checks o.
func (o *Options) validate() error {
	switch {
	case !slices.Contains([]string{"mmlu", "chat", "shared-prefix"}, o.Workload):
		return fmt.Errorf("bench: workload %q is not mmlu, chat or shared-prefix", o.Workload)
	case len(o.Skews) == 0 || len(o.LinksMS) == 0 || len(o.Peers) == 0 || len(o.CacheTokens) == 0:
		return fmt.Errorf("bench: empty grid axis")
	case o.Requests < 1:
		return fmt.Errorf("bench: %d requests", o.Requests)
	case o.Rate < 0 || o.Clients < 0 || o.Churn < 0 || o.Churn >= 1 || o.SlowPeers < 0 || o.SlowPeers > 1:
		return fmt.Errorf("bench: rate, clients, churn or slow-peers out of range")
	}
	for _, l := range o.LinksMS {
		if l < 0 {
			return fmt.Errorf("bench: negative link latency %g", l)
		}
	}
	for _, p := range o.Peers {
		if p < 1 || p > 4096 {
			return fmt.Errorf("bench: %d peers", p)
		}
	}
	if _, err := simnet.ParsePolicies(strings.Join(o.Policies, ",")); err != nil {
		return err
	}
	return o.Profile.Validate()
}

func (o *Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
