package llama

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/meshllm/meshllm/infer"
)

// continuation tokenizes text as the router's verifier does (node's
// replyTokens): after a "\n" sentinel, whose tokens are then cut, so
// that a SentencePiece tokenizer's space prefix lands on the sentinel.
func continuation(t *testing.T, e *Engine, text string) []int32 {
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

func TestScoreGreedyReplyIsArgmax(t *testing.T) {
	e := load(t, nil)
	prompt, err := e.Tokenize("Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := gen(t, e, "Once upon a time", greedy(32))
	reply := continuation(t, e, text)
	if len(reply) < 8 {
		t.Fatalf("reply %q is %d tokens", text, len(reply))
	}
	scores, err := e.Score(context.Background(), prompt, reply)
	if err != nil {
		t.Fatal(err)
	}
	if len(scores) != len(reply) {
		t.Fatalf("%d scores for %d tokens", len(scores), len(reply))
	}
	for i, s := range scores {
		if s.Token != reply[i] || s.Rank != 0 || s.Above != 0 || s.Logprob != s.TopLogprob {
			t.Fatalf("token %d of greedy reply %q: %+v, want rank 0", i, text, s)
		}
	}
	// A token replaced by one the model ranks low scores a worse rank there,
	// and the same scores before it (a cached prefix is reused: prompt and
	// the reply's head are in the KV now).
	bad := slices.Clone(reply)
	k := len(bad) / 2
	bad[k] = (bad[k] + 200) % int32(e.Info().VocabSize)
	scores2, err := e.Score(context.Background(), prompt, bad)
	if err != nil {
		t.Fatal(err)
	}
	if scores2[k].Rank == 0 || scores2[k].Logprob >= scores[k].Logprob {
		t.Fatalf("perturbed token %d scores %+v; honest %+v", k, scores2[k], scores[k])
	}
	for i := range k {
		if scores2[i].Rank != 0 {
			t.Fatalf("token %d before the perturbation scores %+v", i, scores2[i])
		}
	}
}

func TestScoreBounds(t *testing.T) {
	e := load(t, nil)
	n := e.Info().ContextLength
	for name, c := range map[string]struct {
		prompt, reply []int32
		want          error
	}{
		"empty reply":  {[]int32{1, 2}, nil, infer.ErrBadRequest},
		"empty prompt": {nil, []int32{1}, infer.ErrBadRequest},
		"out of vocab": {[]int32{1}, []int32{1 << 20}, infer.ErrBadRequest},
		"over context": {make([]int32, n/2+1), make([]int32, n/2), infer.ErrContextOverflow},
	} {
		if _, err := e.Score(context.Background(), c.prompt, c.reply); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
		}
	}
	// The engine still serves after refusals.
	if text, _ := gen(t, e, "Once", greedy(4)); text == "" {
		t.Fatal("no reply after refused scores")
	}
}
