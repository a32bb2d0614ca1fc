package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
)

// Engine is the simulated engine; see the package doc. It is safe for
// concurrent use. All waiting is done with timers and channels, so under
// testing/synctest an Engine runs in virtual time.
type Engine struct {
	prof    Profile
	info    infer.ModelInfo
	tok     Tokenizer
	compute chan struct{} // a token per compute unit (Profile.Parallel)
	closing chan struct{} // closed by Close
	running sync.WaitGroup

	maxActive int // most requests holding a slot at once (Options.Running)

	mu     sync.Mutex
	slots  *infer.Slots
	queue  []*waiter // FIFO of requests waiting for a slot
	active int
	served int
	closed bool
}

type waiter struct {
	prompt  []int32
	reserve int
	grant   chan grant // buffered: admission never blocks
}

type grant struct{ slot, cached int }

// Options are an Engine's settings beyond its Profile.
type Options struct {
	// Running is the most requests holding a slot at once; the other
	// slots only keep cached prefixes, and Stats reports Running as the
	// engine's slots (what routers see in load announcements). 0 means
	// Profile.Slots. It is the testnet harnesses' knob (simnet.Config's
	// Running), so both run the same engine.
	Running int
}

// New returns an engine for profile p.
func New(p Profile) (*Engine, error) { return NewWithOptions(p, Options{}) }

// NewWithOptions returns an engine for profile p with opts.
func NewWithOptions(p Profile, opts Options) (*Engine, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if opts.Running < 0 {
		return nil, fmt.Errorf("sim: Options.Running %d < 0", opts.Running)
	}
	if opts.Running == 0 || opts.Running > p.Slots {
		opts.Running = p.Slots
	}
	id := sha256.Sum256(fmt.Appendf(nil, "meshllm-sim\x00%s\x00%d", p.Name, p.VocabSize))
	return &Engine{
		prof: p,
		info: infer.ModelInfo{
			Name:               p.Name,
			ID:                 hex.EncodeToString(id[:]),
			Architecture:       "sim",
			Parameters:         p.Parameters,
			ContextLength:      p.ContextLength,
			TrainContextLength: p.ContextLength,
			VocabSize:          p.VocabSize,
			Template:           string(infer.TemplatePlain),
			ToolFormat:         string(infer.ToolFormatGeneric),
			Quantization:       "sim",
		},
		tok:       NewTokenizer(p.VocabSize),
		maxActive: opts.Running,
		compute:   make(chan struct{}, p.Parallel),
		closing:   make(chan struct{}),
		slots:     infer.NewSlots(p.Slots, p.CacheCells, infer.NopKV{}),
	}, nil
}

// Profile returns the engine's profile, defaults filled in.
func (e *Engine) Profile() Profile { return e.prof }

// Info implements infer.Engine.
func (e *Engine) Info() infer.ModelInfo { return e.info }

// Tokenize implements infer.Engine.
func (e *Engine) Tokenize(text string) ([]int32, error) { return e.tok.Encode(text), nil }

// Render implements infer.Engine with the plain template, and the
// generic tool format when tools are given.
func (e *Engine) Render(messages []infer.Message, tools []infer.Tool) (string, error) {
	// A plain format costs nothing to build: no template to compile.
	return infer.NewChatFormat("", infer.ChatFormatOptions{}).Render(messages, tools)
}

// CachedPrefix implements infer.Engine.
func (e *Engine) CachedPrefix(tokens []int32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots.Match(tokens)
}

// WithCache runs fn with the engine's radix tree under the engine's lock; fn
// must be quick and must not modify the tree (digests read it).
func (e *Engine) WithCache(fn func(*cache.Tree)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e.slots.Tree())
}

// Stats implements infer.Engine.
func (e *Engine) Stats() infer.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.slots.Stats()
	return infer.Stats{
		Slots: e.maxActive, Active: e.active, Queued: len(e.queue), QueueLimit: e.prof.QueueLimit,
		CacheCells: s.Cells, CacheLimit: s.Capacity, CachedSeqs: s.Leaves, ServedTotal: e.served,
	}
}

// Close implements infer.Engine: queued and running requests fail with
// infer.ErrClosed, and Close returns once they have.
func (e *Engine) Close() error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.closing)
	}
	e.mu.Unlock()
	e.running.Wait()
	return nil
}

// Generate implements infer.Engine.
func (e *Engine) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	if err := infer.Validate(req, e.info); err != nil {
		return nil, err
	}
	start := time.Now()
	maxTokens := req.Sampling.MaxTokens
	if room := e.prof.ContextLength - len(req.Prompt); maxTokens <= 0 || maxTokens > room {
		maxTokens = room
	}
	w := &waiter{prompt: req.Prompt, reserve: maxTokens, grant: make(chan grant, 1)}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, infer.ErrClosed
	case len(e.queue) >= e.prof.QueueLimit:
		e.mu.Unlock()
		return nil, infer.ErrBusy
	}
	e.running.Add(1)
	defer e.running.Done()
	e.queue = append(e.queue, w)
	e.admitLocked()
	e.mu.Unlock()

	var g grant
	select {
	case g = <-w.grant:
	case <-ctx.Done():
		return nil, e.abandon(w, ctx.Err())
	case <-e.closing:
		return nil, e.abandon(w, infer.ErrClosed)
	}
	defer e.release(g.slot, true)
	return e.serve(ctx, req, g, maxTokens, start, emit)
}

// serve runs an admitted request: prefill in chunks, then decode.
func (e *Engine) serve(ctx context.Context, req infer.Request, g grant, maxTokens int, start time.Time, emit func(infer.Piece) error) (*infer.Result, error) {
	prompt := req.Prompt
	res := &infer.Result{
		PromptTokens: len(prompt),
		CachedTokens: g.cached,
		QueueWait:    time.Since(start),
		Slot:         g.slot,
	}
	prefillStart := time.Now()
	for pos := g.cached; pos < len(prompt); {
		n := min(e.prof.BatchTokens, len(prompt)-pos)
		d := e.prof.prefillChunk(n, pos)
		if pos == g.cached {
			d += secs(e.prof.PrefillBase)
		}
		if err := e.work(ctx, d); err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.slots.Append(g.slot, prompt[pos:pos+n]...)
		e.mu.Unlock()
		pos += n
	}
	firstAt := time.Now()
	res.PrefillDuration = firstAt.Sub(prefillStart)
	res.TimeToFirst = firstAt.Sub(start)

	rep := newReplier(req.Sampling.Seed, prompt)
	stop := infer.NewStopMatcher(req.Sampling.Stop)
	var last int32
	byString := false
	for {
		if res.GeneratedTokens > 0 {
			// Decode the previous token to get the next one's logits.
			if err := e.work(ctx, e.prof.DecodeTime(len(prompt)+res.GeneratedTokens-1)); err != nil {
				return nil, err
			}
			e.mu.Lock()
			e.slots.Append(g.slot, last)
			e.mu.Unlock()
		}
		piece, u := rep.next()
		res.GeneratedTokens++
		if e.prof.ReplyTokens > 0 && u < 1/float64(e.prof.ReplyTokens) {
			res.FinishReason = infer.FinishStop // end of generation token
			break
		}
		out, stopped := stop.Push(piece)
		if err := emit(infer.Piece{Text: out, Tokens: 1}); err != nil {
			return nil, err
		}
		if stopped {
			res.FinishReason = infer.FinishStop
			byString = true
			break
		}
		if res.GeneratedTokens >= maxTokens {
			res.FinishReason = infer.FinishLength
			break
		}
		last = e.tok.ID(piece)
	}
	if rest := stop.Flush(); rest != "" && !byString {
		if err := emit(infer.Piece{Text: rest}); err != nil {
			return nil, err
		}
	}
	res.DecodeDuration = time.Since(firstAt)
	return res, nil
}

// work holds a compute unit for d, the time one step of the model takes.
func (e *Engine) work(ctx context.Context, d time.Duration) error {
	select {
	case e.compute <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closing:
		return infer.ErrClosed
	}
	defer func() { <-e.compute }()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closing:
		return infer.ErrClosed
	}
}

// admitLocked gives slots to queued requests, in order, while the slots,
// the KV cells and Options.Running allow.
func (e *Engine) admitLocked() {
	for len(e.queue) > 0 && e.active < e.maxActive {
		w := e.queue[0]
		slot, cached, ok := e.slots.Acquire(w.prompt, w.reserve, time.Now().UnixNano())
		if !ok {
			return
		}
		e.queue[0] = nil
		e.queue = e.queue[1:]
		e.active++
		w.grant <- grant{slot: slot, cached: cached}
	}
}

// abandon takes w out of the queue, or gives back the slot it was granted
// meanwhile, and returns err.
func (e *Engine) abandon(w *waiter, err error) error {
	e.mu.Lock()
	for i, q := range e.queue {
		if q == w {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			e.admitLocked() // w may have blocked the head
			e.mu.Unlock()
			return err
		}
	}
	e.mu.Unlock()
	g := <-w.grant // granted before we took the lock
	e.release(g.slot, false)
	return err
}

// release frees slot; its tokens stay cached. served counts the request
// in Stats.ServedTotal.
func (e *Engine) release(slot int, served bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.slots.Release(slot, time.Now().UnixNano())
	e.active--
	if served {
		e.served++
	}
	e.admitLocked()
}
