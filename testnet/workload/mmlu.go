package workload

import (
	"fmt"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/testnet/mmlu"
)

// MMLUConfig configures the MMLU 5-shot workload.
type MMLUConfig struct {
	// Set is the loaded benchmark (mmlu.Load).
	Set *mmlu.Set
	// Requests is the number of requests.
	Requests int
	// Skew is the subjects' popularity.
	Skew Skew
	// Subjects limits the workload to the first n subjects (0: all 57).
	Subjects int
	// ReplyTokens is each request's reply length; 0 means 1 (the answer
	// letter, as the 5-shot evaluation reads it).
	ReplyTokens int
	// Vocab is the simulated tokenizer's vocabulary (sim.NewTokenizer); 0
	// means 151936 (Qwen2.5's).
	Vocab int
	// Peers is the number of entry peers; Arrivals when requests come.
	Peers    int
	Arrivals Arrivals
	// Seed makes the stream reproducible.
	Seed uint64
}

// MMLU builds the MMLU 5-shot workload: one request per session, the
// subject drawn with cfg.Skew and the question uniformly among its test
// questions. Prompts are tokenized with the simulated tokenizer, so all
// prompts of a subject share their 5-shot prefix token for token.
func MMLU(cfg MMLUConfig) (*Workload, error) {
	if cfg.Set == nil || len(cfg.Set.Subjects) == 0 {
		return nil, fmt.Errorf("workload: MMLU needs a loaded set")
	}
	if cfg.Requests < 1 {
		return nil, fmt.Errorf("workload: %d requests", cfg.Requests)
	}
	subs := cfg.Set.Subjects
	if cfg.Subjects > 0 && cfg.Subjects < len(subs) {
		subs = subs[:cfg.Subjects]
	}
	if cfg.ReplyTokens <= 0 {
		cfg.ReplyTokens = 1
	}
	if cfg.Vocab <= 0 {
		cfg.Vocab = 151936
	}
	tok := sim.NewTokenizer(cfg.Vocab)
	r := newRand(cfg.Seed, 1)
	pick := newSampler(cfg.Skew, len(subs), r)
	w := &Workload{Name: "mmlu " + cfg.Skew.String()}
	prompts := map[[2]int][]int32{} // tokenized once per (subject, question)
	for range cfg.Requests {
		si := pick.draw(r)
		s := subs[si]
		q := r.IntN(len(s.Test))
		p, ok := prompts[[2]int{si, q}]
		if !ok {
			p = tok.Encode(s.FiveShot(q))
			prompts[[2]int{si, q}] = p
		}
		w.Sessions = append(w.Sessions, Session{})
		w.add(len(w.Sessions)-1, Request{Prompt: p, Reply: randomTokens(r, cfg.ReplyTokens, cfg.Vocab), Group: s.Name})
	}
	if err := w.place(cfg.Arrivals, cfg.Peers, newRand(cfg.Seed, 2)); err != nil {
		return nil, err
	}
	return w, nil
}
