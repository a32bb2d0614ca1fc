package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/testnet/bench"
	"github.com/meshllm/meshllm/testnet/real"
	"github.com/urfave/cli/v2"
)

// benchCommand is `meshllm bench`: routing policies side by side on a
// simulated mesh in virtual time (testnet/bench, testnet/simnet), or, with
// --target, the same workload and metrics on running peers (testnet/real).
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "compare routing policies on a simulated mesh (virtual time; real router, cache and gossip code)",
		Description: "Runs a named scenario (" + strings.Join(bench.Scenarios(), ", ") + ") under every policy\n" +
			"and prints a table (or --json, or --out DIR for CSV, a markdown report and PNG plots).\n" +
			"Flags override the scenario's settings; list flags take comma-separated values and make a grid.\n" +
			"With --target URL[,URL...] it drives running peers instead (policy meshllm-real): only the workload,\n" +
			"skew, requests, rate/clients and seed apply; the peers' own engines, caches and links are measured.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "scenario", Value: "paper", Usage: "preset: " + strings.Join(bench.Scenarios(), ", ")},
			&cli.StringFlag{Name: "peers", Usage: "peers in the mesh (list: a grid)"},
			&cli.StringFlag{Name: "link-ms", Usage: "one-way link latency in ms (list: a grid)"},
			&cli.StringFlag{Name: "workload", Usage: "mmlu, chat or shared-prefix"},
			&cli.StringFlag{Name: "skew", Usage: "subject/group popularity: uniform or zipf:S (list: a grid)"},
			&cli.IntFlag{Name: "requests", Usage: "requests per run"},
			&cli.Float64Flag{Name: "rate", Usage: "Poisson arrivals per second for the whole mesh (chat: conversations)"},
			&cli.IntFlag{Name: "clients", Usage: "closed-loop clients instead of Poisson arrivals"},
			&cli.StringFlag{Name: "cache-tokens", Usage: "KV cache capacity per peer in tokens (list: a grid)"},
			&cli.StringFlag{Name: "profile", Usage: "sim cost profile: paper-0.5b, a sim preset name, or a JSON file from `meshllm calibrate`"},
			&cli.IntFlag{Name: "slots", Usage: "sequences each peer's KV cache keeps (overrides the profile's; calibrated profiles carry the slots they were measured with)"},
			&cli.IntFlag{Name: "running", Usage: "requests an engine runs at once (its other slots only cache)"},
			&cli.StringFlag{Name: "policies", Usage: "comma-separated policies, or all"},
			&cli.Float64Flag{Name: "slow-peers", Usage: "fraction of peers that are --slow-factor times slower"},
			&cli.Float64Flag{Name: "slow-factor", Value: 4, Usage: "how much slower the slow peers are"},
			&cli.Float64Flag{Name: "churn", Usage: "fraction of peers that leave at 1/3 of the run and return at 2/3"},
			&cli.Uint64Flag{Name: "seed", Usage: "random seed (equal seeds give equal results)"},
			&cli.StringFlag{Name: "mmlu", Usage: "MMLU data directory (default: ../shared/data/mmlu)"},
			&cli.IntFlag{Name: "workers", Usage: "simulations run at once (default: GOMAXPROCS)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object {scenario, rows} instead of a table"},
			&cli.StringFlag{Name: "out", Usage: "directory for results.csv, shares.csv, report.md and PNG plots"},
			&cli.StringFlag{Name: "target", Usage: "real mode: comma-separated HTTP URLs of running peers (meshllm testnet up prints them); drives them with the workload instead of simulating"},
			&cli.DurationFlag{Name: "window", Usage: "real mode: how often to read the peers' counters for traffic share over time (default: a twentieth of the arrival span)"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "real mode: limit for one request"},
		},
		Action: func(c *cli.Context) error {
			o, err := benchOptions(c)
			if err != nil {
				return err
			}
			if c.String("target") != "" && !c.IsSet("scenario") {
				o.Scenario = "real"
			}
			var progress func(done, total int)
			if !c.Bool("json") {
				bar := infer.NewProgress(os.Stderr, "bench "+o.Scenario)
				progress = func(done, total int) {
					bar.Update(float32(done) / float32(total))
					if done == total {
						bar.Done()
					}
				}
			}
			var rep *bench.Report
			if t := c.String("target"); t != "" {
				rep, err = benchReal(c, o, t, progress)
			} else {
				rep, err = bench.Run(o, progress)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return rep.WriteJSON(os.Stdout)
			}
			if err := rep.WriteTable(os.Stdout); err != nil {
				return err
			}
			if dir := c.String("out"); dir != "" {
				files, err := rep.WriteDir(dir, "meshllm "+strings.Join(os.Args[1:], " "))
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "wrote %d files to %s\n", len(files), dir)
			}
			return nil
		},
	}
}

// benchReal runs o's workload against the running peers at the
// comma-separated URLs of targets (testnet/real), stopping at Ctrl-C.
func benchReal(c *cli.Context, o bench.Options, targets string, progress func(done, total int)) (*bench.Report, error) {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rc := real.Config{Window: c.Duration("window"), Timeout: c.Duration("timeout"), Progress: progress}
	for _, t := range strings.Split(targets, ",") {
		if t = strings.TrimRight(strings.TrimSpace(t), "/"); t != "" {
			if !strings.Contains(t, "://") {
				t = "http://" + t
			}
			rc.Targets = append(rc.Targets, t)
		}
	}
	return bench.RunReal(ctx, o, rc)
}

// benchOptions is the scenario's options with the flags given applied.
func benchOptions(c *cli.Context) (bench.Options, error) {
	o, err := bench.Scenario(c.String("scenario"))
	if err != nil {
		return o, err
	}
	set := c.IsSet
	if set("peers") {
		if o.Peers, err = bench.ParseInts(c.String("peers")); err != nil {
			return o, err
		}
	}
	if set("link-ms") {
		if o.LinksMS, err = bench.ParseFloats(c.String("link-ms")); err != nil {
			return o, err
		}
	}
	if set("cache-tokens") {
		if o.CacheTokens, err = bench.ParseInts(c.String("cache-tokens")); err != nil {
			return o, err
		}
	}
	if set("skew") {
		if o.Skews, err = bench.ParseSkews(c.String("skew")); err != nil {
			return o, err
		}
	}
	if set("profile") {
		if o.Profile, err = bench.LoadProfile(c.String("profile")); err != nil {
			return o, err
		}
	}
	if set("policies") {
		o.Policies = nil
		for _, p := range strings.Split(c.String("policies"), ",") {
			if p = strings.TrimSpace(p); p == "all" {
				o.Policies = nil
				break
			} else if p != "" {
				o.Policies = append(o.Policies, p)
			}
		}
		if o.Policies == nil {
			def, _ := bench.Scenario("quick")
			o.Policies = def.Policies
		}
	}
	if set("workload") {
		o.Workload = c.String("workload")
	}
	if set("requests") {
		o.Requests = c.Int("requests")
	}
	if set("rate") {
		o.Rate = c.Float64("rate")
	}
	if set("clients") {
		o.Clients = c.Int("clients")
	}
	if set("slots") {
		o.Profile.Slots = c.Int("slots")
	}
	if set("running") {
		o.Running = c.Int("running")
	}
	if set("slow-peers") {
		o.SlowPeers, o.SlowFactor = c.Float64("slow-peers"), c.Float64("slow-factor")
	}
	if set("churn") {
		o.Churn = c.Float64("churn")
	}
	if set("seed") {
		o.Seed = c.Uint64("seed")
	}
	o.Workers = c.Int("workers")
	o.MMLUDir = firstExisting(append([]string{c.String("mmlu")}, defaultMMLUCandidates()...))
	if o.MMLUDir == "" && o.Workload == "mmlu" {
		return o, fmt.Errorf("bench: MMLU data not found; pass --mmlu DIR")
	}
	return o, nil
}
