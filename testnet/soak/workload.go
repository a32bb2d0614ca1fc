package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/meshllm/meshllm/testnet/faults"
	"github.com/meshllm/meshllm/testnet/mmlu"
)

// workload is the soak's client traffic: 70% MMLU 5-shot questions over a
// few subjects, Zipf-skewed (so prefixes are worth routing to their
// holders), and 30% short story continuations that share openings (the
// chat-like part); one request in three streams.
type workload struct {
	seed     uint64
	subjects []*mmlu.Subject
	weights  []float64 // cumulative, Zipf s=1
}

// soakSubjects is how many MMLU subjects the workload draws from.
const soakSubjects = 8

// maxPromptBytes keeps prompt plus reply inside stories260K's 2048-token
// context (its small vocabulary spends about 1.4 bytes a token on MMLU).
const maxPromptBytes = 2600

func newWorkload(set *mmlu.Set, seed uint64) *workload {
	w := &workload{seed: seed}
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, i := range rng.Perm(len(set.Subjects)) {
		if s := set.Subjects[i]; len(s.Prefix()) <= maxPromptBytes*3/4 && len(w.subjects) < soakSubjects {
			w.subjects = append(w.subjects, s)
		}
	}
	sum := 0.0
	for k := range w.subjects {
		sum += 1 / float64(k+1)
		w.weights = append(w.weights, sum)
	}
	for k := range w.weights {
		w.weights[k] /= sum
	}
	return w
}

// ask is the request of worker's seq-th turn; it depends only on (seed,
// worker, seq), so a rerun with the same seed sends the same traffic.
func (w *workload) ask(worker, seq int) faults.Ask {
	rng := rand.New(rand.NewPCG(w.seed^0x9e3779b97f4a7c15, uint64(worker)<<32|uint64(seq)))
	stream := seq%3 == 2
	if rng.Float64() < 0.7 {
		x, k := rng.Float64(), 0
		for k < len(w.weights)-1 && x > w.weights[k] {
			k++
		}
		s := w.subjects[k]
		prompt := s.FiveShot(rng.IntN(len(s.Test)))
		for try := 0; len(prompt) > maxPromptBytes && try < len(s.Test); try++ {
			prompt = s.FiveShot(try) // the first question that fits
		}
		return faults.Ask{Prompt: prompt, MaxTokens: 8 + rng.IntN(9), Stream: stream}
	}
	storyNames := [...]string{"Lily", "Tom", "Sue", "Ben", "Mia", "Max"}
	storyThings := [...]string{"a red ball", "a big dog", "a little boat", "a shiny star", "a tall tree"}
	storyActions := [...]string{"wanted to play", "was very happy", "felt sad", "went to the park", "saw a bird"}
	name := storyNames[rng.IntN(len(storyNames))]
	prompt := fmt.Sprintf("Once upon a time, there was a child named %s. %s had %s.", name, name, storyThings[rng.IntN(len(storyThings))])
	for range rng.IntN(4) {
		prompt += fmt.Sprintf(" %s %s.", name, storyActions[rng.IntN(len(storyActions))])
	}
	return faults.Ask{Prompt: prompt, MaxTokens: 16 + rng.IntN(33), Stream: stream}
}
