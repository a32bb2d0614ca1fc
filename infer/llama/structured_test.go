package llama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const okSchema = `{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":9}},"required":["ok","n"]}`

// genPieces runs one request and returns its pieces.
func genPieces(t *testing.T, e *Engine, prompt string, s infer.Sampling) ([]infer.Piece, *infer.Result) {
	t.Helper()
	toks, err := e.Tokenize(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var pieces []infer.Piece
	res, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: s}, func(p infer.Piece) error {
		pieces = append(pieces, p)
		return nil
	})
	if err != nil {
		t.Fatalf("Generate(%q): %v", prompt, err)
	}
	return pieces, res
}

func textOf(pieces []infer.Piece) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}

// validateJSON checks that text is one JSON value satisfying schema, with
// a real JSON Schema validator.
func validateJSON(t *testing.T, schema, text string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("reply %q is not JSON: %v", text, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("reply %q does not satisfy the schema: %v", text, err)
	}
}

func constrained(c *infer.Constraint, n int) infer.Sampling {
	s := greedy(n)
	s.Constraint = c
	return s
}

func TestConstraintSchema(t *testing.T) {
	e := load(t, nil)
	for _, prompt := range []string{"Once upon a time", "Lily and Ben went to the park."} {
		pieces, res := genPieces(t, e, prompt, constrained(&infer.Constraint{JSONSchema: okSchema}, 200))
		text := textOf(pieces)
		t.Logf("%q -> %q (%s, %d tokens)", prompt, text, res.FinishReason, res.GeneratedTokens)
		if res.FinishReason != infer.FinishStop {
			t.Fatalf("finish %q: the grammar did not end the reply", res.FinishReason)
		}
		validateJSON(t, okSchema, text)
	}
}

func TestConstraintWithAffixes(t *testing.T) {
	e := load(t, nil)
	// Prefix and suffix with every character GBNF must escape.
	c := infer.Constraint{JSONSchema: okSchema, Prefix: "```json \"[x]\" \\ \t\n", Suffix: "\n``` ]done["}
	pieces, res := genPieces(t, e, "Once upon a time", constrained(&c, 200))
	text := textOf(pieces)
	t.Logf("%q (%s)", text, res.FinishReason)
	if res.FinishReason != infer.FinishStop {
		t.Fatalf("finish %q: the grammar did not end the reply", res.FinishReason)
	}
	body, ok := strings.CutPrefix(text, c.Prefix)
	if !ok {
		t.Fatalf("reply %q does not start with the prefix %q", text, c.Prefix)
	}
	if body, ok = strings.CutSuffix(body, c.Suffix); !ok {
		t.Fatalf("reply %q does not end with the suffix %q", text, c.Suffix)
	}
	validateJSON(t, c.JSONSchema, body)
}

// TestConstraintJSONObject is json_object mode. Greedy stories260K keeps
// adding members to an open object until max_tokens (it never picks "}"
// over ","), so these runs add the penalties that, as probed, make it
// close the object: at least one must finish, every finished reply must be
// a JSON object, and every cut one a prefix of valid JSON.
func TestConstraintJSONObject(t *testing.T) {
	e := load(t, func(c *Config) { c.ContextLength = 512 })
	schema := `{"type":"object"}`
	finished := 0
	for _, run := range []struct {
		prompt              string
		frequency, presence float32
	}{{"Lily said", 1, 0}, {"Once upon a time", 0.5, 1}, {"Once upon a time", 0.5, 2}} {
		s := constrained(&infer.Constraint{JSONSchema: schema}, 400)
		s.FrequencyPenalty, s.PresencePenalty, s.RepeatLastN = run.frequency, run.presence, -1
		pieces, res := genPieces(t, e, run.prompt, s)
		text := textOf(pieces)
		t.Logf("%q f=%g p=%g: %s after %d tokens: %.120q", run.prompt, run.frequency, run.presence, res.FinishReason, res.GeneratedTokens, text)
		if res.FinishReason != infer.FinishStop {
			if !jsonPrefix(text) || !strings.HasPrefix(text, "{") {
				t.Fatalf("cut reply %q is not the start of a JSON object", text)
			}
			continue
		}
		finished++
		validateJSON(t, schema, text)
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Fatalf("json_object reply %q is not an object: %v", text, err)
		}
	}
	if finished == 0 {
		t.Fatal("no json_object run finished")
	}
}

// jsonPrefix reports whether text is valid JSON or the start of some.
func jsonPrefix(text string) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		_, err := dec.Token()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return true
		default:
			return false
		}
	}
}

// TestConstraintCutByMaxTokens documents what a too-small max_tokens does:
// the reply stops mid-value, with finish reason "length".
func TestConstraintCutByMaxTokens(t *testing.T) {
	e := load(t, nil)
	pieces, res := genPieces(t, e, "Once upon a time", constrained(&infer.Constraint{JSONSchema: okSchema}, 3))
	text := textOf(pieces)
	if res.FinishReason != infer.FinishLength || res.GeneratedTokens != 3 {
		t.Fatalf("finish %q after %d tokens, want length after 3", res.FinishReason, res.GeneratedTokens)
	}
	if !strings.HasPrefix(text, "{") || json.Valid([]byte(text)) {
		t.Fatalf("cut reply %q: want the start of an object, not a whole one", text)
	}
}

func TestBadConstraintIsBadRequest(t *testing.T) {
	e := load(t, nil)
	toks, _ := e.Tokenize("Once upon a time")
	many := `{"type":"object","properties":{`
	for i := range 20 {
		many += fmt.Sprintf(`"p%d":{"type":"string","maxLength":2000},`, i)
	}
	many = strings.TrimSuffix(many, ",") + `}}`
	for name, schema := range map[string]string{
		"unresolvable $ref": `{"$ref":"#/definitions/missing"}`,
		"bad pattern":       `{"type":"string","pattern":"(unclosed"}`,
		"repetition budget": many,
		"not a schema":      `{"type":`,
	} {
		s := constrained(&infer.Constraint{JSONSchema: schema}, 8)
		_, err := e.Generate(context.Background(), infer.Request{Prompt: toks, Sampling: s}, func(infer.Piece) error { return nil })
		if !errors.Is(err, infer.ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	// The engine is unharmed.
	if text, res := gen(t, e, "Once upon a time", greedy(4)); text == "" || res.GeneratedTokens != 4 {
		t.Fatalf("after bad constraints: %q %+v", text, res)
	}
}

func TestConstraintGrammarText(t *testing.T) {
	g, err := constraintGrammar(&infer.Constraint{JSONSchema: `{"const":"root"}`, Prefix: `a"b\`, Suffix: "]\n"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g, `root ::= "a\"b\\" `+valueRule+` "\]\n"`+"\n") {
		t.Fatalf("root rule not wrapped:\n%s", g)
	}
	if !definesRule(g, valueRule) || strings.Count(g, "root ::=") != 1 {
		t.Fatalf("schema root not renamed:\n%s", g)
	}
	if !strings.Contains(g, `"\"root\""`) {
		t.Fatalf("the literal \"root\" was renamed too:\n%s", g)
	}
	// A property named like the value rule makes the rename pick another name.
	g, err = constraintGrammar(&infer.Constraint{JSONSchema: `{"type":"object","properties":{"meshllm-value":{"type":"object","properties":{"a":{"type":"integer"}}}},"required":["meshllm-value"]}`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g, "root ::= "+valueRule+"-2\n") {
		t.Fatalf("the value rule's name collides with the schema's:\n%s", g)
	}
	if gr := llama.NewGrammar(g, nil, nil, nil); gr == nil {
		t.Fatalf("grammar does not parse:\n%s", g)
	} else {
		gr.Free()
	}
	t.Logf("grammar:\n%s", g)
}

func TestFrequencyPenalty(t *testing.T) {
	e := load(t, nil)
	counts := func(s infer.Sampling) (string, int) {
		s.Logprobs = true // the token texts, to count repeats
		pieces, _ := genPieces(t, e, "Once upon a time", s)
		n := map[string]int{}
		most := 0
		for _, p := range pieces {
			for _, lp := range p.Logprobs {
				n[lp.Token]++
				most = max(most, n[lp.Token])
			}
		}
		return textOf(pieces), most
	}
	plain, plainMost := counts(greedy(64))
	s := greedy(64)
	s.FrequencyPenalty = 2
	s.RepeatLastN = -1
	pen, penMost := counts(s)
	t.Logf("no penalty (a token up to %dx): %q", plainMost, plain)
	t.Logf("frequency 2 (a token up to %dx): %q", penMost, pen)
	if plain == pen {
		t.Fatal("a frequency penalty of 2 did not change the greedy reply")
	}
	if penMost >= plainMost {
		t.Fatalf("with the penalty a token repeats %d times, without %d", penMost, plainMost)
	}
	s.FrequencyPenalty, s.PresencePenalty = 0, 2
	if pres, _ := counts(s); pres == plain {
		t.Fatal("a presence penalty of 2 did not change the greedy reply")
	}
}

// TestRepeatLastNClamped: -1 and any value beyond the context mean the
// whole context (llama.cpp would otherwise allocate a ring buffer of that
// many tokens).
func TestRepeatLastNClamped(t *testing.T) {
	e := load(t, nil)
	run := func(n int) string {
		s := greedy(48)
		s.RepeatPenalty, s.RepeatLastN = 1.5, n
		text, _ := gen(t, e, "Once upon a time", s)
		return text
	}
	whole := run(e.Info().ContextLength)
	if got := run(-1); got != whole {
		t.Fatalf("repeat_last_n -1 gave %q, the context length %q", got, whole)
	}
	if got := run(1 << 30); got != whole {
		t.Fatalf("repeat_last_n 2^30 gave %q, the context length %q", got, whole)
	}
	if got := samplingParams(infer.Sampling{RepeatLastN: 1 << 30}, "", 256).RepeatLastN; got != 256 {
		t.Fatalf("RepeatLastN %d, want 256", got)
	}
}

func checkLogprobs(t *testing.T, pieces []infer.Piece, top int, greedy bool) {
	t.Helper()
	for i, p := range pieces {
		if len(p.Logprobs) != p.Tokens {
			t.Fatalf("piece %d (%q) accounts for %d tokens but has %d logprobs", i, p.Text, p.Tokens, len(p.Logprobs))
		}
		for _, lp := range p.Logprobs {
			if !(lp.Logprob <= 0) || len(lp.Top) != top {
				t.Fatalf("piece %d: logprob %v with %d alternatives, want <= 0 and %d", i, lp.Logprob, len(lp.Top), top)
			}
			var sum float64
			for j, a := range lp.Top {
				if !(a.Logprob <= 0) || (j > 0 && a.Logprob > lp.Top[j-1].Logprob) {
					t.Fatalf("alternatives not log probabilities, most likely first: %+v", lp.Top)
				}
				sum += math.Exp(float64(a.Logprob))
			}
			if sum > 1+1e-4 {
				t.Fatalf("alternatives' probabilities add up to %v", sum)
			}
			if greedy && top > 0 && (lp.Top[0].Token != lp.Token || lp.Top[0].Logprob != lp.Logprob) {
				t.Fatalf("greedy chose %q (%v) but the most likely was %q (%v)", lp.Token, lp.Logprob, lp.Top[0].Token, lp.Top[0].Logprob)
			}
		}
	}
}

func TestLogprobs(t *testing.T) {
	e := load(t, nil)
	s := greedy(40)
	s.Logprobs, s.TopLogprobs = true, 5
	pieces, res := genPieces(t, e, "Once upon a time", s)
	checkLogprobs(t, pieces, 5, true)
	total := 0
	for _, p := range pieces {
		total += len(p.Logprobs)
	}
	if total != res.GeneratedTokens {
		t.Fatalf("%d logprobs for %d generated tokens", total, res.GeneratedTokens)
	}
	text := textOf(pieces)

	// A stop string holds text back: the tokens it covers, and their
	// logprobs, arrive with the next piece or the final flush.
	words := strings.Fields(text)
	if len(words) < 4 {
		t.Fatalf("reply %q too short to pick a stop string", text)
	}
	s.Stop = []string{words[3]}
	s.TopLogprobs = 0
	pieces, res = genPieces(t, e, "Once upon a time", s)
	checkLogprobs(t, pieces, 0, true)
	total = 0
	for _, p := range pieces {
		total += len(p.Logprobs)
	}
	if res.FinishReason != infer.FinishStop || total != res.GeneratedTokens {
		t.Fatalf("with stop %q: %s, %d logprobs for %d tokens", s.Stop[0], res.FinishReason, total, res.GeneratedTokens)
	}

	// Sampled (not greedy) and constrained: the invariants still hold.
	s = infer.Sampling{Temperature: 1, Seed: 7, MaxTokens: 60, Logprobs: true, TopLogprobs: infer.MaxTopLogprobs,
		Constraint: &infer.Constraint{JSONSchema: okSchema}}
	pieces, _ = genPieces(t, e, "Once upon a time", s)
	checkLogprobs(t, pieces, infer.MaxTopLogprobs, false)

	// Without logprobs asked, none are attached.
	pieces, _ = genPieces(t, e, "Once upon a time", greedy(8))
	for _, p := range pieces {
		if p.Logprobs != nil {
			t.Fatalf("logprobs without asking: %+v", p)
		}
	}
}

func TestTopTokensAndLogSumExp(t *testing.T) {
	x := []float32{1, 5, 3, 5, -2, 4}
	if got := topTokens(x, 3); fmt.Sprint(got) != "[1 3 5]" {
		t.Fatalf("topTokens = %v, want [1 3 5]", got)
	}
	if got := topTokens(x, 10); len(got) != len(x) || got[len(got)-1] != 4 {
		t.Fatalf("topTokens(all) = %v", got)
	}
	lse := logSumExp(x)
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(logprob(v, lse)))
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Fatalf("probabilities add up to %v", sum)
	}
	if got := logprob(float32(math.Inf(-1)), lse); got != minLogprob {
		t.Fatalf("a ruled-out token's logprob %v, want %v", got, minLogprob)
	}
}

// TestDeadEndGrammarIsBadRequest: a schema whose grammar admits no token
// (a NUL character: no token's text holds one) is refused before a token
// is sampled — llama.cpp's sampler would abort the process on it — and
// the engine keeps serving.
func TestDeadEndGrammarIsBadRequest(t *testing.T) {
	e := load(t, nil)
	for _, schema := range []string{
		`{"type":"string","pattern":"^\\u0000$"}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^x\\u0000$"}},"required":["a"]}`,
	} {
		prompt, err := e.Tokenize("Once upon a time")
		if err != nil {
			t.Fatal(err)
		}
		req := infer.Request{Prompt: prompt, Sampling: constrained(&infer.Constraint{JSONSchema: schema}, 32)}
		_, err = e.Generate(t.Context(), req, func(infer.Piece) error { return nil })
		if !errors.Is(err, infer.ErrBadRequest) {
			t.Fatalf("schema %s: err %v, want ErrBadRequest", schema, err)
		}
	}
	if _, res := genPieces(t, e, "Once upon a time", greedy(4)); res.GeneratedTokens == 0 {
		t.Fatalf("after the dead-end grammars: %+v", res)
	}
}

// TestSamplersFreedAtSequenceEnd: each sequence's sampler (with a ring of
// repeat_last_n tokens, clamped to the context) is freed when it ends, not
// left to a finalizer — and not freed twice: GC after many sequences, the
// binding's finalizers included, must not crash.
func TestSamplersFreedAtSequenceEnd(t *testing.T) {
	e := load(t, nil)
	s := greedy(4)
	s.RepeatLastN = 1 << 30 // clamped to the context
	for i := range 40 {
		if i%2 == 1 {
			s.Constraint = &infer.Constraint{JSONSchema: okSchema}
		} else {
			s.Constraint = nil
		}
		genPieces(t, e, "Once upon a time", s)
	}
	runtime.GC()
	runtime.GC()
	if _, res := genPieces(t, e, "Once upon a time", greedy(4)); res.GeneratedTokens == 0 {
		t.Fatalf("after freeing samplers: %+v", res)
	}
}
