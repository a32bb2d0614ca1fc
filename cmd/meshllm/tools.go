package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/llama"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/infer/synth"
	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/urfave/cli/v2"
)

func modelCommand() *cli.Command {
	return &cli.Command{
		Name:  "model",
		Usage: "model tools",
		Subcommands: []*cli.Command{{
			Name:  "synth",
			Usage: "write a GGUF with a real model's shape and random weights (its prefill costs what the real model's does)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "shape", Value: "qwen2.5-0.5b", Usage: "tiny, qwen2.5-0.5b or llama3.2-1b"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "GGUF file to write"},
				&cli.StringFlag{Name: "type", Value: "f16", Usage: "weight type: f16 or f32"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed (equal seeds give identical files)"},
			},
			Action: func(c *cli.Context) error {
				return synthModel(c.String("shape"), c.String("type"), c.Uint64("seed"), c.String("out"))
			},
		}},
	}
}

// synthModel writes a synthetic model with a progress bar.
func synthModel(shapeName, typ string, seed uint64, out string) error {
	shape, err := synth.LookupShape(shapeName)
	if err != nil {
		return err
	}
	t, err := synth.ParseType(typ)
	if err != nil {
		return err
	}
	bar := infer.NewProgress(os.Stderr, "writing "+filepath.Base(out))
	err = synth.WriteFile(out, shape, synth.Options{Type: t, Seed: seed, Progress: func(w, total int64) {
		bar.Update(float32(w) / float32(max(total, 1)))
	}})
	bar.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %s shape, %d parameters, %s weights\n", out, shape.Name, shape.Parameters(), t)
	return nil
}

func calibrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "calibrate",
		Usage: "measure the real engine on a model and write a cost profile for the simulated engine",
		Flags: append(engineFlags(),
			&cli.StringFlag{Name: "out", Value: "profile.json", Usage: "profile file to write"},
			&cli.IntFlag{Name: "repeats", Value: 2, Usage: "runs per measured prompt shape"}),
		Action: func(c *cli.Context) error {
			eng, err := loadEngine(c)
			if err != nil {
				return err
			}
			defer eng.Close()
			fmt.Fprintln(os.Stderr, "measuring cold and warm prefill and decode ...")
			p, err := sim.Calibrate(c.Context, eng, sim.CalibrateOptions{Repeats: c.Int("repeats")})
			if err != nil {
				return err
			}
			if err := p.Save(c.String("out")); err != nil {
				return err
			}
			b, _ := json.MarshalIndent(p, "", "  ")
			fmt.Println(string(b))
			fmt.Fprintf(os.Stderr, "wrote %s\n", c.String("out"))
			return nil
		},
	}
}

func benchEngineCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench-engine",
		Usage: "prefill/decode speed and cold vs. cached TTFT of the real engine on a synthetic model",
		Flags: append(engineFlags(),
			&cli.StringFlag{Name: "shape", Value: "qwen2.5-0.5b", Usage: "synthetic shape to benchmark (ignored with --model)"},
			&cli.StringFlag{Name: "type", Value: "f32", Usage: "synthetic weight type: f32 or f16"},
			&cli.StringFlag{Name: "cache-dir", Value: filepath.Join(".build", "models"), Usage: "where synthetic models are kept between runs"},
			&cli.IntFlag{Name: "prompt-tokens", Value: 256, Usage: "prompt length of the prefill measurement"},
			&cli.IntFlag{Name: "decode-tokens", Value: 32, Usage: "tokens generated in the decode measurement"},
			&cli.StringFlag{Name: "mmlu", Usage: "MMLU data directory, or none (default: ../shared/data/mmlu)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"}),
		Action: func(c *cli.Context) error {
			if c.String("model") == "" {
				path := filepath.Join(c.String("cache-dir"), fmt.Sprintf("synth-%s-%s.gguf", c.String("shape"), c.String("type")))
				if _, err := os.Stat(path); err != nil {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						return err
					}
					if err := synthModel(c.String("shape"), c.String("type"), 1, path); err != nil {
						return err
					}
				}
				c.Set("model", path)
			}
			if !c.IsSet("slots") {
				c.Set("slots", "2")
			}
			eng, err := loadEngine(c)
			if err != nil {
				return err
			}
			defer eng.Close()
			dir, err := mmluDir(c)
			if err != nil {
				return err
			}
			r, err := benchEngine(c.Context, eng, c.Int("prompt-tokens"), c.Int("decode-tokens"), dir)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
				return nil
			}
			fmt.Printf("model            %s (%d parameters, %s)\n", r.Model, r.Parameters, r.Quantization)
			fmt.Printf("threads          %d\n", r.Threads)
			fmt.Printf("prefill          %.1f tok/s over %d tokens (%.1f GFLOP/s effective)\n", r.PrefillTokPerSec, r.PromptTokens, r.PrefillGFLOPS)
			fmt.Printf("decode           %.1f tok/s over %d tokens\n", r.DecodeTokPerSec, r.DecodeTokens)
			if r.ColdTTFT > 0 {
				fmt.Printf("TTFT cold        %s (%d-token 5-shot prompt, nothing cached)\n", r.ColdTTFT.Round(time.Millisecond), r.FiveShotTokens)
				fmt.Printf("TTFT warm        %s (%d tokens cached)\n", r.WarmTTFT.Round(time.Millisecond), r.WarmCached)
				fmt.Printf("cold/warm ratio  %.1fx\n", r.ColdTTFT.Seconds()/r.WarmTTFT.Seconds())
			}
			return nil
		},
	}
}

// benchResult is what bench-engine measures.
type benchResult struct {
	Model            string        `json:"model"`
	Parameters       uint64        `json:"parameters"`
	Quantization     string        `json:"quantization"`
	Threads          int           `json:"threads"`
	PromptTokens     int           `json:"prompt_tokens"`
	PrefillTokPerSec float64       `json:"prefill_tok_per_s"`
	PrefillGFLOPS    float64       `json:"prefill_gflops"`
	DecodeTokens     int           `json:"decode_tokens"`
	DecodeTokPerSec  float64       `json:"decode_tok_per_s"`
	FiveShotTokens   int           `json:"five_shot_tokens"`
	ColdTTFT         time.Duration `json:"cold_ttft_ns"`
	WarmTTFT         time.Duration `json:"warm_ttft_ns"`
	WarmCached       int           `json:"warm_cached_tokens"`
}

func benchEngine(ctx context.Context, eng *llama.Engine, promptTokens, decodeTokens int, mmluDir string) (*benchResult, error) {
	info := eng.Info()
	r := &benchResult{Model: info.Name, Parameters: info.Parameters, Quantization: info.Quantization, Threads: eng.Config().Threads}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(300 + rng.IntN(info.VocabSize-300)) // past the special and byte tokens
		}
		return t
	}
	run := func(prompt []int32, maxTokens int) (*infer.Result, error) {
		return eng.Generate(ctx, infer.Request{Prompt: prompt, Sampling: infer.Sampling{MaxTokens: maxTokens, Seed: 1}},
			func(infer.Piece) error { return nil })
	}
	if _, err := run(random(8), 1); err != nil { // warm-up: first-use allocations
		return nil, err
	}
	res, err := run(random(promptTokens), 1)
	if err != nil {
		return nil, err
	}
	r.PromptTokens = res.PromptTokens - res.CachedTokens
	r.PrefillTokPerSec = res.PrefillTokensPerSecond()
	r.PrefillGFLOPS = 2 * float64(info.Parameters) * r.PrefillTokPerSec / 1e9
	// Decode: ignore end-of-generation so the run has its full length.
	res, err = run(random(16), decodeTokens)
	if err != nil {
		return nil, err
	}
	r.DecodeTokens = res.GeneratedTokens
	r.DecodeTokPerSec = res.DecodeTokensPerSecond()
	if mmluDir == "" {
		return r, nil
	}
	set, err := mmlu.Load(mmluDir)
	if err != nil {
		return nil, err
	}
	sub := set.Subject("high_school_geography")
	for i := range 2 {
		toks, err := eng.Tokenize(sub.FiveShot(i))
		if err != nil {
			return nil, err
		}
		if len(toks) >= info.ContextLength {
			return nil, fmt.Errorf("5-shot prompt of %d tokens exceeds the context %d: pass --ctx", len(toks), info.ContextLength)
		}
		res, err := run(toks, 1)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			r.FiveShotTokens, r.ColdTTFT = len(toks), res.TimeToFirst
		} else {
			r.WarmTTFT, r.WarmCached = res.TimeToFirst, res.CachedTokens
		}
	}
	return r, nil
}
