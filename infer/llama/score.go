package llama

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// scoreJob is the scoring part of a job (Engine.Score): the reply whose
// tokens are scored, and the scores the loop writes. The loop owns it
// until the job finishes; Score reads out after that.
type scoreJob struct {
	reply []int32
	out   []infer.TokenScore
}

// scoreSeq is a running scoring sequence's state in the loop: seq.prompt
// is prompt+reply, and the logits at positions from..len(seq.prompt)-2
// score the token after each. marked lists the positions (and batch
// indexes) whose logits the current step asked for.
type scoreSeq struct {
	job    *scoreJob
	from   int
	marked []scoreMark
}

type scoreMark struct{ pos, idx int }

// mark records that position pos is fed at batch index idx and reports
// whether its logits are wanted.
func (s *scoreSeq) mark(pos, idx, n int) bool {
	if pos < s.from || pos >= n-1 {
		return false
	}
	s.marked = append(s.marked, scoreMark{pos, idx})
	return true
}

// Score implements infer.Scorer: it queues a job like Generate's, which
// the loop prefills as prompt+reply in ordinary batches (sharing them with
// other requests), asking for logits at the reply's positions only. The
// slot then holds prompt+reply, cached like any served request. It costs
// one vocabulary-sized copy and scan per reply token; no second context.
func (e *Engine) Score(ctx context.Context, prompt, reply []int32) ([]infer.TokenScore, error) {
	if err := infer.ValidateScore(prompt, reply, e.info); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	j := newJob(ctx, infer.Request{Prompt: prompt}, time.Now())
	j.score = &scoreJob{reply: reply}
	if err := e.enqueue(j); err != nil {
		return nil, err
	}
	select {
	case <-j.finished:
	case <-ctx.Done():
		e.poke()
		<-j.finished
		return nil, ctx.Err()
	}
	_, _, err, _ := j.take()
	if err != nil {
		return nil, err
	}
	return j.score.out, nil
}

// admitScore starts a scoring job j in slot, whose KV holds the first
// cached prompt tokens. The caller holds e.mu.
func (e *Engine) admitScore(j *job, slot, cached int, now time.Time) *seq {
	full := make([]int32, 0, len(j.req.Prompt)+len(j.score.reply))
	full = append(append(full, j.req.Prompt...), j.score.reply...)
	j.score.out = make([]infer.TokenScore, 0, len(j.score.reply))
	e.active++
	return &seq{
		job:      j,
		slot:     slot,
		prompt:   full,
		next:     cached,
		pos:      cached,
		stop:     infer.NewStopMatcher(nil),
		score:    &scoreSeq{job: j.score, from: len(j.req.Prompt) - 1},
		logitIdx: -1,
		admitted: now,
		res: infer.Result{
			PromptTokens: len(full), CachedTokens: cached, QueueWait: now.Sub(j.start), Slot: slot,
		},
	}
}

// scoreRead scores the positions the last step marked and reports whether
// s finished (all of its tokens fed). Only the loop calls it.
func (e *Engine) scoreRead(s *seq) bool {
	for _, m := range s.score.marked {
		logits := e.lctx.GetLogitsIth(m.idx)
		if len(logits) != e.info.VocabSize {
			e.end(s, nil, fmt.Errorf("%w: no logits at batch index %d", infer.ErrEngine, m.idx), false)
			return true
		}
		s.score.job.out = append(s.score.job.out, scoreToken(logits, s.prompt[m.pos+1]))
	}
	s.score.marked = s.score.marked[:0]
	if s.next < len(s.prompt) {
		return false
	}
	s.res.PrefillDuration = time.Since(s.admitted)
	e.end(s, &s.res, nil, false)
	return true
}

// scoreToken is tok's TokenScore under logits (one position's raw
// distribution): its rank, its and the top token's log probability, and
// the mass of the tokens above it. Pure; O(len(logits)).
func scoreToken(logits []float32, tok int32) infer.TokenScore {
	lse := logSumExp(logits)
	x := logits[tok]
	var rank int
	var above float64
	top := x
	for _, v := range logits {
		if v > x {
			rank++
			above += math.Exp(float64(v) - lse)
		}
		if v > top {
			top = v
		}
	}
	if math.IsNaN(above) {
		above = 1
	}
	return infer.TokenScore{
		Token: tok, Rank: rank, Logprob: logprob(x, lse), TopLogprob: logprob(top, lse),
		Above: float32(min(above, 1)),
	}
}
