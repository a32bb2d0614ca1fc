package simnet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/meshllm/meshllm/testnet/workload"
)

func TestSmoke(t *testing.T) {
	set, err := mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
	if err != nil {
		t.Skip(err)
	}
	prof := sim.Profile{Name: "paper", ContextLength: 4096, VocabSize: 151936, Slots: 16, Parallel: 1,
		PrefillBase: 0.015, PrefillToken: 0.00045, PrefillAttention: 1e-8, DecodeToken: 0.01, DecodeAttention: 1e-9}
	for _, skew := range []workload.Skew{workload.Uniform, {Zipf: true, S: 1.1}} {
		w, err := workload.MMLU(workload.MMLUConfig{Set: set, Requests: 2000, Skew: skew, Peers: 4, Arrivals: workload.Arrivals{Rate: 6}, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range []time.Duration{2 * time.Millisecond, 1000 * time.Millisecond} {
			for _, name := range PolicyNames() {
				p, _ := NewPolicy(name)
				r, err := Run(Config{Peers: 4, Profile: prof, CacheTokens: 16 * 700, Net: Network{Link: link}, Seed: 1}, w, p)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %v %-16s mean %.3f p99 %.3f hit %.3f rhit %.3f fwd %.2f share %.2f/%.2f gossip %.0f B/s dec %.1fus wall %.2fs ev %d err %d",
					skew, link, name, r.MeanLatency, r.P99Latency, r.HitRate, r.RequestHitRate, r.Forwarded, r.MaxShare, r.PeakWindowShare, r.GossipBytesPerPeerSec, r.DecideMicros, r.WallSeconds, r.Events, r.Errors)
			}
		}
	}
}
