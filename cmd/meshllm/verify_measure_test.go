package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer/llama"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/synth"
	"github.com/meshllm/meshllm/node"
)

// TestVerifyMeasure measures verified answers (docs/security.md): the
// largest rank and logprob gap of honest replies from stories260K under
// other thread counts and batch sizes (false positives at the
// default bounds), the detection rate per kind of lie, and the origin's
// cost per check. It prints a table; run it with
//
//	MESHLLM_MEASURE=1 go test ./cmd/meshllm -run TestVerifyMeasure -v
func TestVerifyMeasure(t *testing.T) {
	load := func(t *testing.T, mod func(*llama.Config)) *llama.Engine {
		t.Helper()
		cfg := llama.DefaultConfig(storiesPath)
		cfg.Threads = 1
		cfg.ContextLength = 256
		if mod != nil {
			mod(&cfg)
		}
		e, err := llama.Load(cfg)
		if err != nil {
			t.Fatalf("llama.Load: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	if os.Getenv("MESHLLM_MEASURE") != "1" {
		t.Skip("set MESHLLM_MEASURE=1 to measure verified answers")
	}
	const replyTokens = 48
	bounds := node.DefaultVerifyBounds()
	origin := load(t, func(c *llama.Config) { c.ContextLength = 512 })
	peers := []struct {
		name string
		mod  func(*llama.Config)
	}{
		{"same config", nil},
		{"threads 2", func(c *llama.Config) { c.Threads = 2 }},
		{"batch 7", func(c *llama.Config) { c.BatchSize = 7 }},
		{"threads 2, batch 7", func(c *llama.Config) { c.Threads, c.BatchSize = 2, 7 }},
	}
	other := filepath.Join(t.TempDir(), "tiny.gguf")
	shape, err := synth.LookupShape("tiny") // stories260K's shape and vocabulary size
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteFile(other, shape, synth.Options{Type: synth.F32, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	liarModel, err := llama.Load(func() llama.Config {
		c := llama.DefaultConfig(other)
		c.Threads, c.ContextLength = 1, 512
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer liarModel.Close()

	starts := []string{"Once upon a time", "One day, a little", "The cat", "Lily and Ben", "There was a big",
		"Tom had a red", "In the park", "Mom said", "The sun was", "A little bird",
		"Sam wanted to", "The dog ran", "Anna found a", "Once there was a", "The boy saw",
		"It was a sunny day", "The girl liked", "Timmy was", "They went to", "A big bear"}
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := origin.Info().VocabSize
	greedyS := infer.Sampling{Temperature: 0, MaxTokens: replyTokens, Seed: 1}
	sampledS := infer.Sampling{Temperature: 1, TopK: 40, TopP: 0.95, MaxTokens: replyTokens}

	type row struct {
		n, caught           int
		worstRank           int
		worstGap, worstMean float32
	}
	rows := map[string]*row{}
	var order []string
	var scoreTime time.Duration
	var scored, scoredTokens int
	var genTime time.Duration
	judge := func(kind string, prompt []int32, text string, s infer.Sampling) {
		reply := continuation(t, origin, text)
		if len(reply) == 0 {
			return
		}
		reply = reply[:min(len(reply), bounds.MaxTokens, origin.Info().ContextLength-len(prompt))]
		t0 := time.Now()
		scores, err := origin.Score(context.Background(), prompt, reply)
		scoreTime += time.Since(t0)
		scored++
		scoredTokens += len(reply)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		v := node.JudgeReply(scores, s, 0, 0, bounds)
		r := rows[kind]
		if r == nil {
			r = &row{worstMean: 0}
			rows[kind] = r
			order = append(order, kind)
		}
		r.n++
		if v.Lie {
			r.caught++
		}
		r.worstRank = max(r.worstRank, v.WorstRank)
		r.worstGap = max(r.worstGap, v.WorstGap)
		r.worstMean = min(r.worstMean, v.MeanLogprob)
	}
	generate := func(e *llama.Engine, prompt []int32, s infer.Sampling) string {
		var b strings.Builder
		t0 := time.Now()
		if _, err := e.Generate(context.Background(), infer.Request{Prompt: prompt, Sampling: s}, func(p infer.Piece) error {
			b.WriteString(p.Text)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		genTime += time.Since(t0)
		return b.String()
	}
	perturb := func(prompt []int32, text string, k int) string {
		toks := slices.Clone(continuation(t, origin, text))
		for range k {
			i := rng.IntN(len(toks))
			toks[i] = int32(3 + rng.IntN(vocab-3))
		}
		return origin.Detokenize(toks)
	}
	for _, p := range peers {
		peer := load(t, func(c *llama.Config) {
			c.ContextLength = 512
			if p.mod != nil {
				p.mod(c)
			}
		})
		for i, st := range starts {
			prompt, err := peer.Tokenize(st)
			if err != nil {
				t.Fatal(err)
			}
			judge("honest greedy, "+p.name, prompt, generate(peer, prompt, greedyS), greedyS)
			s := sampledS
			s.Seed = int64(100 + i)
			judge("honest sampled T=1, "+p.name, prompt, generate(peer, prompt, s), s)
			hot := s
			hot.Temperature, hot.TopK, hot.TopP = 1.5, 0, 0
			judge("honest sampled T=1.5, "+p.name, prompt, generate(peer, prompt, hot), hot)
		}
		peer.Close()
	}
	for _, st := range starts {
		prompt, _ := origin.Tokenize(st)
		honest := generate(origin, prompt, greedyS)
		random := make([]int32, replyTokens)
		for i := range random {
			random[i] = int32(3 + rng.IntN(vocab-3))
		}
		judge("lie: random tokens (greedy req)", prompt, origin.Detokenize(random), greedyS)
		judge("lie: random tokens (sampled req)", prompt, origin.Detokenize(random), sampledS)
		otherText := generate(liarModel, prompt, greedyS)
		otherToks := continuation(t, liarModel, otherText)
		judge("lie: other model (greedy req)", prompt, origin.Detokenize(otherToks), greedyS)
		judge("lie: other model (sampled req)", prompt, origin.Detokenize(otherToks), sampledS)
		for _, k := range []int{1, 3} {
			judge(fmt.Sprintf("lie: %d tokens replaced (greedy req)", k), prompt, perturb(prompt, honest, k), greedyS)
			judge(fmt.Sprintf("lie: %d tokens replaced (sampled req)", k), prompt, perturb(prompt, honest, k), sampledS)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| reply kind | replies | judged lies | worst rank | worst gap (nats) | lowest mean logprob |\n|---|---|---|---|---|---|\n")
	for _, k := range order {
		r := rows[k]
		fmt.Fprintf(&out, "| %s | %d | %d (%.0f%%) | %d | %.3g | %.2f |\n", k, r.n, r.caught, 100*float64(r.caught)/float64(r.n), r.worstRank, r.worstGap, r.worstMean)
	}
	per := scoreTime / time.Duration(scored)
	fmt.Fprintf(&out, "\nscoring: %d replies, %.1f tokens each, %.2f ms per check (%.3f ms per token); generating a reply took %.2f ms on average; at VerifyFraction %.2f the origin spends %.3f ms per forwarded reply (%.1f%% of one reply's generation)\n",
		scored, float64(scoredTokens)/float64(scored), per.Seconds()*1e3, per.Seconds()*1e3*float64(scored)/float64(scoredTokens),
		(genTime/time.Duration(len(starts)*(len(peers)*3+2))).Seconds()*1e3,
		node.DefaultPolicy().VerifyFraction, node.DefaultPolicy().VerifyFraction*per.Seconds()*1e3,
		100*node.DefaultPolicy().VerifyFraction*per.Seconds()/(genTime/time.Duration(len(starts)*(len(peers)*3+2))).Seconds())
	t.Log(out.String())
	for _, k := range order {
		if strings.HasPrefix(k, "honest") && rows[k].caught > 0 {
			t.Errorf("false positives: %s: %d of %d", k, rows[k].caught, rows[k].n)
		}
	}
}

// continuation tokenizes text as the router's verifier does (node's
// replyTokens): after a "\n" sentinel, whose tokens are then cut.
func continuation(t *testing.T, e *llama.Engine, text string) []int32 {
	t.Helper()
	sent, err := e.Tokenize("\n")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := e.Tokenize("\n" + text)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(toks[:len(sent)], sent) {
		t.Fatalf("sentinel merged: %v vs %v", toks, sent)
	}
	return toks[len(sent):]
}
