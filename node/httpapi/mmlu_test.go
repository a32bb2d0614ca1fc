package httpapi

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
)

// mmluDir is the paper's workload, beside the repository.
const mmluDir = "../../shared/data/mmlu"

// fewShotPrompts builds the standard 5-shot prompts of the first n test
// questions of a subject (the header, 5 dev examples, then the question).
func fewShotPrompts(t *testing.T, subject string, n int) []string {
	t.Helper()
	read := func(kind string) [][]string {
		f, err := os.Open(filepath.Join(mmluDir, kind, subject+"_"+kind+".csv"))
		if err != nil {
			t.Skipf("MMLU data not found (%v): it lives in shared/data/mmlu beside the repository", err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows[1:] // header
	}
	format := func(row []string, answer bool) string {
		var b strings.Builder
		b.WriteString(row[0])
		for i, c := range row[1:5] {
			fmt.Fprintf(&b, "\n%c. %s", 'A'+i, c)
		}
		b.WriteString("\nAnswer:")
		if answer {
			fmt.Fprintf(&b, " %c\n\n", 'A'+row[5][0]-'0')
		}
		return b.String()
	}
	var head strings.Builder
	fmt.Fprintf(&head, "The following are multiple choice questions (with answers) about %s.\n\n", strings.ReplaceAll(subject, "_", " "))
	for _, row := range read("dev") {
		head.WriteString(format(row, true))
	}
	var out []string
	for _, row := range read("test")[:n] {
		out = append(out, head.String()+format(row, false))
	}
	return out
}

// TestMMLUPrefixCachedThroughBothAPIs sends two 5-shot prompts of one
// subject through each API to the simulated engine (a real radix-tree KV
// cache): the second reports the shared prefix as cached, less than one
// block short, and prefills faster.
func TestMMLUPrefixCachedThroughBothAPIs(t *testing.T) {
	prompts := fewShotPrompts(t, "anatomy", 2)
	eng, err := sim.New(sim.Profile{
		Name: "sim-0.5b", ContextLength: 4096, VocabSize: 151936, Slots: 2,
		PrefillToken: 50e-6, DecodeToken: 1e-5, // 16 ms for a whole prompt: fast, yet far from timer noise
	})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv, err := NewServer(DefaultConfig(), eng)
	if err != nil {
		t.Fatal(err)
	}
	base := httptestServer(t, srv.Handler())
	ctx := context.Background()

	// The shared prefix in tokens, as the server renders the prompts.
	var toks [2][]int32
	for i, p := range prompts {
		text, _ := eng.Render([]infer.Message{{Role: "user", Content: p}}, nil)
		toks[i], _ = eng.Tokenize(text)
	}
	shared := commonPrefix(toks[0], toks[1])
	const block = 16 // the digest block size bound the issue allows
	if shared < 200 {
		t.Fatalf("shared prefix only %d tokens", shared)
	}

	// OpenAI: cached_tokens in usage, prefill time in timings.
	client := openAIClient(base)
	var prefill [2]float64
	for i, p := range prompts {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "sim-0.5b", MaxTokens: openai.Int(2),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(p)},
		})
		if err != nil {
			t.Fatal(err)
		}
		var tm timings
		if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["timings"].Raw()), &tm); err != nil {
			t.Fatal(err)
		}
		prefill[i] = tm.PromptMS
		cached := int(resp.Usage.PromptTokensDetails.CachedTokens)
		if i == 1 && cached < shared-block {
			t.Errorf("second prompt cached %d tokens, shared prefix is %d", cached, shared)
		}
		t.Logf("openai prompt %d: %d tokens, %d cached, prefill %.2f ms", i, resp.Usage.PromptTokens, cached, tm.PromptMS)
	}
	if prefill[1] >= prefill[0] {
		t.Errorf("prefill did not get faster: %.3f ms then %.3f ms", prefill[0], prefill[1])
	}

	// Ollama: prompt_eval_count and cached_tokens on the done line. The
	// first prompt is cached now from the OpenAI round.
	oc := ollamaClient(t, base)
	for i, p := range []string{prompts[1], prompts[0]} {
		var final api.ChatResponse
		err := oc.Chat(ctx, &api.ChatRequest{Model: "sim-0.5b", Messages: []api.Message{{Role: "user", Content: p}},
			Options: map[string]any{"num_predict": 2}}, func(r api.ChatResponse) error {
			if r.Done {
				final = r
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if final.PromptEvalCount != len(toks[1-i]) {
			t.Errorf("prompt_eval_count %d, want %d", final.PromptEvalCount, len(toks[1-i]))
		}
	}
	status, _, body := post(t, base, "/api/generate", fmt.Sprintf(`{"model":"sim-0.5b","prompt":%q,"stream":false,"options":{"num_predict":1}}`, prompts[0]))
	var r generateResponse
	mustJSON(t, body, &r)
	if status != 200 || r.CachedTokens == nil || *r.CachedTokens < len(toks[0])-block {
		t.Errorf("ollama repeat of a cached prompt: %d %s", status, body)
	}
}
