package llama

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/synth"
	"github.com/ollama/ollama/llama"
)

// TestMeasureGrammarGuard prints what the grammar guard costs on a
// qwen2.5-0.5b-shaped model (a 152k-token vocabulary): building its tables
// and grammar per constrained request, and the check before each token —
// with the one-byte probe, and over the whole vocabulary (the fallback).
//
//	MESHLLM_MEASURE=1 go test ./infer/llama -run TestMeasureGrammarGuard -v -count=1
func TestMeasureGrammarGuard(t *testing.T) {
	if os.Getenv("MESHLLM_MEASURE") == "" {
		t.Skip("set MESHLLM_MEASURE=1 to measure the grammar guard (writes a 1 GB synthetic model)")
	}
	shape, err := synth.LookupShape("qwen2.5-0.5b")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "q.gguf")
	if err := synth.WriteFile(path, shape, synth.Options{Type: synth.F16, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(path)
	cfg.Slots, cfg.ContextLength = 1, 2048
	e, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	g, err := constraintGrammar(&infer.Constraint{JSONSchema: `{"type":"object"}`})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v := e.vocabTables()
	t.Logf("vocabulary tables, once per engine (%d tokens, %d in the probe): %v", len(v.ids), len(v.probe), time.Since(start))
	start = time.Now()
	gg, err := e.newGrammarGuard(g)
	if err != nil {
		t.Fatal(err)
	}
	defer gg.free()
	t.Logf("guard per constrained request: %v", time.Since(start))
	const n = 50
	start = time.Now()
	for range n {
		if !gg.viable() {
			t.Fatal("a JSON object grammar at its start is not viable")
		}
	}
	t.Logf("check before a token (probe): %v", time.Since(start)/n)
	all := make([]llama.TokenData, len(v.ids))
	for i := range all {
		all[i].ID = int32(i)
	}
	start = time.Now()
	for range n / 10 {
		gg.anyAllowed(all)
	}
	t.Logf("check over the whole vocabulary (the fallback): %v", time.Since(start)/(n/10))
}
