// Command soak runs a mesh of real `meshllm join` processes for a long
// time under a steady client workload while it kills, freezes and restarts
// peers at random, and reports requests served, failures (which must be
// zero), latency per minute, and each peer's goroutine and memory growth
// from its /metrics.
//
//	go run ./testnet/soak -duration 2m          # or: SOAK_DURATION=2m make soak
//
// Peer 0 is the bootstrap peer and is never faulted, so restarted peers
// always have a way back and its growth spans the whole run. The client
// only sends through peers that are up and not about to be faulted; a
// fault hits the requests those peers forward.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meshllm/meshllm/testnet/mmlu"
)

// config is the soak's flags.
type config struct {
	bin, model, mmluDir string
	peers, workers      int
	duration            time.Duration
	faultEvery          time.Duration // mean time between faults
	downFor             time.Duration // mean time a killed peer stays down
	seed                uint64
	jsonOut             string
}

func parseFlags() config {
	c := config{}
	flag.StringVar(&c.bin, "bin", "bin/meshllm", "the meshllm binary (make build)")
	flag.StringVar(&c.model, "model", "../shared/models/stories260K.gguf", "GGUF model every peer serves")
	flag.StringVar(&c.mmluDir, "mmlu", mmlu.DefaultDir, "MMLU data directory")
	flag.IntVar(&c.peers, "peers", envInt("SOAK_PEERS", 5), "peers in the mesh ($SOAK_PEERS)")
	flag.IntVar(&c.workers, "workers", 2, "client requests in flight at once")
	flag.DurationVar(&c.duration, "duration", envDuration("SOAK_DURATION", 30*time.Minute), "how long to run ($SOAK_DURATION)")
	flag.DurationVar(&c.faultEvery, "fault-every", 20*time.Second, "mean time between two faults")
	flag.DurationVar(&c.downFor, "down-for", 5*time.Second, "mean time a killed peer stays down (a frozen one stays frozen)")
	flag.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "random seed (printed, for reruns)")
	flag.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.Parse()
	return c
}

func envInt(k string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(k), &v); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil && d > 0 {
		return d
	}
	return def
}

func main() {
	cfg := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	rep.print(os.Stdout)
	if cfg.jsonOut != "" {
		if err := rep.writeJSON(cfg.jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
	}
	if rep.Failures > 0 {
		os.Exit(1)
	}
}

// run starts the mesh, drives it for cfg.duration under faults, and
// reports.
func run(ctx context.Context, cfg config) (*report, error) {
	if cfg.peers < 3 {
		return nil, fmt.Errorf("need at least 3 peers, got %d", cfg.peers)
	}
	set, err := mmlu.Load(cfg.mmluDir)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x50a4))
	fmt.Fprintf(os.Stderr, "soak: %d peers, %s, a fault every ~%s, seed %d\n", cfg.peers, cfg.duration, cfg.faultEvery, cfg.seed)
	m, err := startMesh(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer m.close()
	fmt.Fprintf(os.Stderr, "soak: mesh formed\n")

	rctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	start := time.Now()
	samples := make(chan []sample, 1)
	go func() { samples <- m.sample(rctx, 10*time.Second) }()
	faults := make(chan []faultEvent, 1)
	go func() { faults <- m.chaos(rctx, rand.New(rand.NewPCG(rng.Uint64(), 1))) }()
	results := m.drive(rctx, newWorkload(set, rng.Uint64()))
	return newReport(cfg, start, results, <-faults, <-samples), nil
}
