package node

import (
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// sc builds scores from (rank, logprob, top logprob, above) rows.
func sc(rows ...[4]float32) []infer.TokenScore {
	out := make([]infer.TokenScore, len(rows))
	for i, r := range rows {
		out[i] = infer.TokenScore{Token: int32(i), Rank: int(r[0]), Logprob: r[1], TopLogprob: r[2], Above: r[3]}
	}
	return out
}

func repeat(n int, row [4]float32) [][4]float32 {
	out := make([][4]float32, n)
	for i := range out {
		out[i] = row
	}
	return out
}

func TestJudgeReply(t *testing.T) {
	b := DefaultVerifyBounds()
	greedy := infer.Sampling{Temperature: 0}
	argmax := [4]float32{0, -0.1, -0.1, 0}
	tie := [4]float32{5, -1.2, -1.0, 0.6}    // rank 5 but 0.2 nats from the top: numerics
	far := [4]float32{40, -9, -0.1, 0.99}    // a replaced token
	near := [4]float32{3, -2.5, -0.2, 0.8}   // rank 3: inside GreedyRank
	over := [4]float32{4, -2.5, -0.2, 0.8}   // rank 4, 2.3 nats off
	likely := [4]float32{2, -1.5, -0.5, 0.4} // a sampled token
	random := [4]float32{200, -11, -0.5, 0.999}
	for _, c := range []struct {
		name         string
		scores       []infer.TokenScore
		s            infer.Sampling
		head, tail   int
		lie          bool
		bad, checked int
	}{
		{"greedy argmax", sc(argmax, argmax, argmax), greedy, 0, 0, false, -1, 3},
		{"greedy near tie", sc(argmax, tie, argmax), greedy, 0, 0, false, -1, 3},
		{"greedy rank at bound", sc(argmax, near), greedy, 0, 0, false, -1, 2},
		{"greedy rank over bound", sc(argmax, over), greedy, 0, 0, true, 1, 2},
		{"greedy replaced token", sc(argmax, argmax, far, argmax), greedy, 0, 0, true, 2, 4},
		{"greedy bad head skipped", sc(far, argmax), greedy, 1, 0, false, -1, 1},
		{"greedy bad tail skipped", sc(argmax, far), greedy, 0, 1, false, -1, 1},
		{"all skipped", sc(far), greedy, 1, 1, false, -1, 0},
		{"empty", nil, greedy, 0, 0, false, -1, 0},
		{"constrained is not judged", sc(far, far), infer.Sampling{Constraint: &infer.Constraint{JSONSchema: "{}"}}, 0, 0, false, -1, 0},
		{"penalized greedy: no rank check", sc(far, argmax), infer.Sampling{RepeatPenalty: 1.3}, 0, 0, false, -1, 2},
		{"penalized greedy: mean still checked", sc(repeat(8, random)...), infer.Sampling{RepeatPenalty: 1.3}, 0, 0, true, -1, 8},
		{"sampled likely", sc(repeat(10, likely)...), infer.Sampling{Temperature: 1}, 0, 0, false, -1, 10},
		{"sampled random", sc(repeat(10, random)...), infer.Sampling{Temperature: 1}, 0, 0, true, -1, 10},
		{"sampled random, too short for the mean", sc(repeat(7, random)...), infer.Sampling{Temperature: 1}, 0, 0, false, -1, 7},
		{"sampled default temperature", sc(repeat(10, random)...), infer.Sampling{Temperature: -1}, 0, 0, true, -1, 10},
		{"top_k inside", sc(likely), infer.Sampling{Temperature: 1, TopK: 2}, 0, 0, false, -1, 1},
		{"top_k outside", sc(likely, [4]float32{3, -2, -0.5, 0.5}), infer.Sampling{Temperature: 1, TopK: 2}, 0, 0, true, 1, 2},
		{"top_k ignored under penalties", sc(likely, [4]float32{3, -2, -0.5, 0.5}), infer.Sampling{Temperature: 1, TopK: 2, PresencePenalty: 1}, 0, 0, false, -1, 2},
		{"top_p inside slack", sc([4]float32{1, -1, -0.5, 0.52}), infer.Sampling{Temperature: 1, TopP: 0.5}, 0, 0, false, -1, 1},
		{"top_p outside", sc([4]float32{1, -1, -0.5, 0.6}), infer.Sampling{Temperature: 1, TopP: 0.5}, 0, 0, true, 0, 1},
		{"min_p inside", sc([4]float32{1, -2.5, -0.5, 0.6}), infer.Sampling{Temperature: 1, MinP: 0.1}, 0, 0, false, -1, 1},
		{"min_p outside", sc([4]float32{1, -3.5, -0.5, 0.6}), infer.Sampling{Temperature: 1, MinP: 0.1}, 0, 0, true, 0, 1},
	} {
		v := JudgeReply(c.scores, c.s, c.head, c.tail, b)
		if v.Lie != c.lie || v.Bad != c.bad || v.Checked != c.checked {
			t.Errorf("%s: verdict %+v, want lie %v bad %d checked %d", c.name, v, c.lie, c.bad, c.checked)
		}
		if v.Lie && v.Reason == "" {
			t.Errorf("%s: a lie without a reason", c.name)
		}
	}
}

func TestVerifyBoundsValidate(t *testing.T) {
	if err := DefaultVerifyBounds().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*VerifyBounds){
		func(b *VerifyBounds) { b.GreedyRank = -1 },
		func(b *VerifyBounds) { b.TopPSlack = -0.1 },
		func(b *VerifyBounds) { b.MeanLogprob = 1 },
		func(b *VerifyBounds) { b.MeanMinTokens = 0 },
		func(b *VerifyBounds) { b.MaxTokens = 0 },
	} {
		b := DefaultVerifyBounds()
		mod(&b)
		if b.Validate() == nil {
			t.Errorf("%+v validated", b)
		}
	}
	p := DefaultPolicy()
	p.VerifyFraction = 1.5
	if p.Validate() == nil {
		t.Error("VerifyFraction 1.5 validated")
	}
}

func TestTrustLieCostsAllTrust(t *testing.T) {
	tr, err := NewTrust(DefaultTrustConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	tr.Observe("B", Claim{Expected: time.Second, Took: time.Second}, now)
	if honest := tr.Observe("B", Claim{Lied: true}, now); honest {
		t.Fatal("a lie judged honest")
	}
	if got := tr.Get("B", now); got != 0 {
		t.Fatalf("trust after a lie %v, want 0", got)
	}
	// A slow reply costs only MissFactor.
	tr.Observe("C", Claim{Expected: time.Second, Took: time.Hour}, now)
	if got := tr.Get("C", now); got != DefaultTrustConfig().MissFactor {
		t.Fatalf("trust after a slow reply %v", got)
	}
}
