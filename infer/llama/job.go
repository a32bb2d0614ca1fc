package llama

import (
	"context"
	"sync"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// job is one request travelling between Generate (the caller's goroutine)
// and the loop. The loop appends pieces to the outbox and finishes the job;
// Generate drains the outbox and calls emit, so a slow client never blocks
// the loop. The outbox is bounded by the request's MaxTokens.
type job struct {
	ctx      context.Context
	req      infer.Request
	start    time.Time
	notify   chan struct{} // cap 1: outbox changed
	finished chan struct{} // closed when the loop is done with the job
	// grammar is the GBNF of req.Sampling.Constraint ("" without one),
	// built by newJob on the caller's goroutine, not the loop's; prepErr
	// is why it could not be (an infer.ErrBadRequest), and the loop fails
	// the job with it instead of serving it.
	grammar string
	prepErr error
	// score is set for a scoring job (Engine.Score, score.go): the loop
	// prefills Prompt+score.reply and writes the scores instead of
	// generating.
	score *scoreJob

	mu     sync.Mutex
	outbox []infer.Piece
	res    *infer.Result
	err    error
	fin    bool
}

func newJob(ctx context.Context, req infer.Request, now time.Time) *job {
	j := &job{ctx: ctx, req: req, start: now, notify: make(chan struct{}, 1), finished: make(chan struct{})}
	if c := req.Sampling.Constraint; c != nil {
		j.grammar, j.prepErr = constraintGrammar(c)
	}
	return j
}

func (j *job) push(p infer.Piece) {
	j.mu.Lock()
	j.outbox = append(j.outbox, p)
	j.mu.Unlock()
	j.signal()
}

// finish records the outcome; the loop calls it exactly once.
func (j *job) finish(res *infer.Result, err error) {
	j.mu.Lock()
	j.res, j.err, j.fin = res, err, true
	j.mu.Unlock()
	close(j.finished)
	j.signal()
}

func (j *job) signal() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// take returns the pending pieces and, once finished, the outcome.
func (j *job) take() (pieces []infer.Piece, res *infer.Result, err error, fin bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	pieces, j.outbox = j.outbox, nil
	return pieces, j.res, j.err, j.fin
}
