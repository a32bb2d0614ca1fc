package main

import (
	"path/filepath"
	"testing"

	"github.com/meshllm/meshllm/testnet/mmlu"
)

func TestWorkloadFitsAndRepeats(t *testing.T) {
	set, err := mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
	if err != nil {
		t.Skipf("MMLU data: %v", err)
	}
	w1, w2 := newWorkload(set, 42), newWorkload(set, 42)
	if len(w1.subjects) != soakSubjects {
		t.Fatalf("%d subjects", len(w1.subjects))
	}
	streams := 0
	for seq := range 300 {
		a, b := w1.ask(seq%2, seq), w2.ask(seq%2, seq)
		if a.Prompt != b.Prompt || a.MaxTokens != b.MaxTokens || a.Stream != b.Stream {
			t.Fatalf("request %d differs between runs with one seed", seq)
		}
		if len(a.Prompt) > maxPromptBytes || a.MaxTokens <= 0 {
			t.Fatalf("request %d: %d prompt bytes, %d max tokens", seq, len(a.Prompt), a.MaxTokens)
		}
		if a.Stream {
			streams++
		}
	}
	if streams != 100 {
		t.Fatalf("%d of 300 requests stream, want 100", streams)
	}
}
