package llama

import (
	"fmt"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
)

// seq is a request holding a KV slot. Only the loop touches it.
type seq struct {
	job       *job
	slot      int
	prompt    []int32
	next      int   // index of the next prompt token to feed (== len(prompt) once decoding)
	pos       int   // KV position of the next token fed
	pending   int32 // sampled token to feed next step
	sampler   *llama.SamplingContext
	guard     *grammarGuard // the constraint's grammar, mirrored; nil without one
	stop      *infer.StopMatcher
	maxTokens int
	held      int // generated tokens not yet accounted in an emitted piece
	logprobs  bool
	top       int                  // alternatives per token when logprobs
	heldLP    []infer.TokenLogprob // logprobs of the held tokens, when logprobs
	logitIdx  int                  // batch index whose logits to sample this step; -1 if none
	score     *scoreSeq            // set for a scoring job (score.go): no sampling
	fed       []int32
	admitted  time.Time
	firstTok  time.Time
	res       infer.Result
}

// loop owns the llama context, the batch and the slots; see the package doc.
func (e *Engine) loop() {
	defer close(e.done)
	batch, err := llama.NewBatch(e.cfg.BatchSize, e.cfg.Slots, 0)
	if err != nil {
		e.failAll(nil, fmt.Errorf("%w: %v", infer.ErrEngine, err))
		return
	}
	defer batch.Free()
	var running []*seq
	for {
		select {
		case <-e.stopped:
			e.failAll(running, infer.ErrClosed)
			return
		default:
		}
		running = e.reap(running)
		running = e.admit(running)
		if len(running) == 0 {
			select {
			case <-e.wake:
			case <-e.stopped:
			}
			continue
		}
		running = e.step(batch, running)
	}
}

// admit moves queued jobs into idle slots while KV cells allow.
func (e *Engine) admit(running []*seq) []*seq {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.queue) > 0 {
		j := e.queue[0]
		if err := j.ctx.Err(); err != nil {
			e.queue = e.queue[1:]
			j.finish(nil, err)
			continue
		}
		if j.prepErr != nil {
			e.queue = e.queue[1:]
			j.finish(nil, j.prepErr)
			continue
		}
		maxTokens := j.req.Sampling.MaxTokens
		room := e.info.ContextLength - len(j.req.Prompt)
		if maxTokens <= 0 || maxTokens > room {
			maxTokens = room
		}
		if j.score != nil {
			maxTokens = len(j.score.reply) // fits: ValidateScore checked
		}
		now := time.Now()
		slot, cached, ok := e.slots.Acquire(j.req.Prompt, maxTokens, now.UnixNano())
		if !ok {
			break
		}
		e.queue = e.queue[1:]
		if j.score != nil {
			running = append(running, e.admitScore(j, slot, cached, now))
			continue
		}
		sampler, err := llama.NewSamplingContext(e.model, samplingParams(j.req.Sampling, j.grammar, e.info.ContextLength))
		if err != nil {
			e.slots.Release(slot, now.UnixNano())
			j.finish(nil, fmt.Errorf("%w: %v", infer.ErrEngine, err))
			continue
		}
		var guard *grammarGuard
		if j.grammar != "" {
			if guard, err = e.newGrammarGuard(j.grammar); err == nil && !guard.viable() {
				guard.free()
				err = infer.BadRequestf("json schema admits no reply this model can write (it asks for text no token holds, such as a NUL character)")
			}
			if err != nil {
				freeSampler(sampler)
				e.slots.Release(slot, now.UnixNano())
				j.finish(nil, err)
				continue
			}
		}
		// Teach the sampler the prompt so repeat penalties see it; not its
		// grammar (applyGrammar false), which constrains the reply only.
		for _, t := range j.req.Prompt {
			sampler.Accept(int(t), false)
		}
		s := &seq{
			job:       j,
			slot:      slot,
			prompt:    j.req.Prompt,
			next:      cached,
			pos:       cached,
			sampler:   sampler,
			guard:     guard,
			stop:      infer.NewStopMatcher(j.req.Sampling.Stop),
			maxTokens: maxTokens,
			logprobs:  j.req.Sampling.Logprobs,
			top:       j.req.Sampling.TopLogprobs,
			admitted:  now,
		}
		s.res = infer.Result{
			PromptTokens: len(j.req.Prompt),
			CachedTokens: cached,
			QueueWait:    now.Sub(j.start),
			Slot:         slot,
		}
		e.active++
		running = append(running, s)
	}
	return running
}

// reap ends requests whose caller went away; their cached tokens stay.
func (e *Engine) reap(running []*seq) []*seq {
	kept := running[:0]
	for _, s := range running {
		if err := s.job.ctx.Err(); err != nil {
			e.end(s, nil, err, false)
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

// step decodes one batch: the next token of every decoding sequence, then
// prompt chunks of prefilling ones, up to BatchSize tokens.
func (e *Engine) step(batch *llama.Batch, running []*seq) []*seq {
	batch.Clear()
	budget := e.cfg.BatchSize
	for _, s := range running {
		s.logitIdx = -1
		s.fed = s.fed[:0]
		if s.next == len(s.prompt) && budget > 0 {
			s.logitIdx = batch.NumTokens()
			batch.Add(int(s.pending), nil, s.pos, true, s.slot)
			s.fed = append(s.fed, s.pending)
			budget--
		}
	}
	for _, s := range running {
		if s.next == len(s.prompt) || budget == 0 {
			continue
		}
		k := min(len(s.prompt)-s.next, budget)
		for i := 0; i < k; i++ {
			last := s.next+i == len(s.prompt)-1
			logits := last
			if s.score != nil {
				last, logits = false, s.score.mark(s.next+i, batch.NumTokens(), len(s.prompt))
			}
			if last {
				s.logitIdx = batch.NumTokens()
			}
			batch.Add(int(s.prompt[s.next+i]), nil, s.pos+i, logits, s.slot)
		}
		s.fed = append(s.fed, s.prompt[s.next:s.next+k]...)
		budget -= k
	}
	if err := e.lctx.Decode(batch); err != nil {
		// The KV contents of every sequence in this batch are now in doubt:
		// fail those requests and forget their slots; others carry on.
		err = fmt.Errorf("%w: llama_decode: %v", infer.ErrEngine, err)
		kept := running[:0]
		for _, s := range running {
			if len(s.fed) > 0 {
				e.end(s, nil, err, true)
			} else {
				kept = append(kept, s)
			}
		}
		return kept
	}
	now := time.Now()
	e.mu.Lock()
	for _, s := range running {
		if len(s.fed) > 0 {
			e.slots.Append(s.slot, s.fed...)
		}
	}
	e.mu.Unlock()
	kept := running[:0]
	for _, s := range running {
		if len(s.fed) == 0 {
			kept = append(kept, s)
			continue
		}
		if s.next < len(s.prompt) {
			s.next += len(s.fed)
		}
		s.pos += len(s.fed)
		if s.score != nil {
			if done := e.scoreRead(s); !done {
				kept = append(kept, s)
			}
			continue
		}
		if s.logitIdx < 0 {
			kept = append(kept, s)
			continue
		}
		if done := e.sample(s, now); done {
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

// sample draws the next token of s and reports whether s finished.
func (e *Engine) sample(s *seq, now time.Time) bool {
	var logits []float32
	if s.logprobs {
		// The model's distribution, before penalties, grammar and
		// truncation; the copy (vocabulary-sized) is made only when asked.
		if logits = e.lctx.GetLogitsIth(s.logitIdx); len(logits) != e.info.VocabSize {
			e.end(s, nil, fmt.Errorf("%w: no logits at batch index %d", infer.ErrEngine, s.logitIdx), false)
			return true
		}
	}
	if s.guard != nil && !s.guard.viable() {
		e.end(s, nil, infer.BadRequestf("json schema admits no continuation after %d tokens (it asks for text no token holds, such as a NUL character)", s.res.GeneratedTokens), false)
		return true
	}
	tok := s.sampler.Sample(e.lctx, s.logitIdx)
	if s.logprobs {
		s.heldLP = append(s.heldLP, e.tokenLogprob(logits, tok, s.top))
	}
	if s.res.GeneratedTokens == 0 {
		s.firstTok = now
		s.res.PrefillDuration = now.Sub(s.admitted)
		s.res.TimeToFirst = now.Sub(s.job.start)
	}
	s.res.GeneratedTokens++
	s.held++
	if e.model.TokenIsEog(tok) {
		// Not accepted: the sequence ends here. (A grammar lets the
		// sampler pick end-of-generation only once it is complete.)
		s.res.FinishReason = infer.FinishStop
		e.end(s, &s.res, nil, false)
		return true
	}
	// Accept advances the penalties' history and the grammar: the sampled
	// token is one the grammar allowed, as it is the first sampler of the
	// chain that chose it.
	if s.guard != nil && !s.guard.accept(tok) {
		e.end(s, nil, fmt.Errorf("%w: the grammar's mirror refused token %d the sampler chose", infer.ErrEngine, tok), false)
		return true
	}
	s.sampler.Accept(tok, true)
	out, stopped := s.stop.Push(e.model.TokenToPiece(tok))
	if out != "" {
		s.job.push(s.piece(out))
	}
	switch {
	case stopped:
		s.res.FinishReason = infer.FinishStop
	case s.res.GeneratedTokens >= s.maxTokens || s.pos+1 >= e.info.ContextLength:
		s.res.FinishReason = infer.FinishLength
	default:
		s.pending = int32(tok)
		return false
	}
	e.end(s, &s.res, nil, false)
	return true
}

// end finishes s: it frees the slot (dropping its KV when drop is set),
// flushes held-back text and hands the outcome to the caller.
func (e *Engine) end(s *seq, res *infer.Result, err error, drop bool) {
	now := time.Now()
	freeSampler(s.sampler) // not left to the binding's finalizer
	s.sampler = nil
	s.guard.free()
	s.guard = nil
	if res != nil {
		if rest := s.stop.Flush(); rest != "" || s.held > 0 {
			s.job.push(s.piece(rest))
		}
		if !s.firstTok.IsZero() {
			res.DecodeDuration = now.Sub(s.firstTok)
		}
	}
	e.mu.Lock()
	if drop {
		e.slots.Drop(s.slot, now.UnixNano())
	} else {
		e.slots.Release(s.slot, now.UnixNano())
	}
	e.active--
	if err == nil {
		e.served++
	}
	e.mu.Unlock()
	s.job.finish(res, err)
}

// failAll fails every running and queued job (shutdown or a broken loop).
func (e *Engine) failAll(running []*seq, err error) {
	for _, s := range running {
		e.end(s, nil, err, false)
	}
	e.mu.Lock()
	q := e.queue
	e.queue = nil
	e.closed = true
	e.mu.Unlock()
	for _, j := range q {
		j.finish(nil, err)
	}
}

// piece returns a piece of text accounting for the held tokens (and their
// logprobs), which it resets.
func (s *seq) piece(text string) infer.Piece {
	p := infer.Piece{Text: text, Tokens: s.held, Logprobs: s.heldLP}
	s.held, s.heldLP = 0, nil
	return p
}

// defaultRepeatLastN is the penalty window when a request sets none
// (llama.cpp's and Ollama's default).
const defaultRepeatLastN = 64

// samplingParams maps request parameters to llama.cpp's common sampler;
// grammar is the GBNF of the request's constraint ("" for none) and
// contextLength the served context, which bounds the penalty window
// (llama.cpp allocates a ring buffer of that many tokens).
func samplingParams(s infer.Sampling, grammar string, contextLength int) llama.SamplingParams {
	p := llama.SamplingParams{
		TopK:           s.TopK,
		TopP:           s.TopP,
		MinP:           s.MinP,
		TypicalP:       1,
		Temp:           s.Temperature,
		RepeatLastN:    s.RepeatLastN,
		PenaltyRepeat:  s.RepeatPenalty,
		PenaltyFreq:    s.FrequencyPenalty,
		PenaltyPresent: s.PresencePenalty,
		Seed:           uint32(s.Seed),
		Grammar:        grammar,
	}
	if p.Temp < 0 {
		p.Temp = 0.8 // unset: llama.cpp's and Ollama's default
	}
	if p.TopP <= 0 || p.TopP > 1 {
		p.TopP = 1
	}
	if p.PenaltyRepeat <= 0 {
		p.PenaltyRepeat = 1
	}
	switch p.RepeatLastN {
	case -1:
		p.RepeatLastN = contextLength
	case 0:
		p.RepeatLastN = defaultRepeatLastN
	}
	p.RepeatLastN = max(0, min(p.RepeatLastN, contextLength))
	if s.Seed < 0 {
		p.Seed = 0xFFFFFFFF // LLAMA_DEFAULT_SEED: a random seed
	}
	return p
}
