package simnet

import (
	"math"
	"slices"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/sim"
)

// engine is infer/sim's Engine as events: the same Slots (real prefix cache,
// LRU by KV cells), the same admission FIFO, prefill in BatchTokens chunks
// (the first one carrying PrefillBase), one decode step per generated token
// after the first, and each step holding one of Profile.Parallel compute
// units, granted first come first served. Replies are the request's given
// tokens (Profile.ReplyTokens is not used: lengths come from the workload).
// Unlike sim.Engine it never answers ErrBusy: every request queues, so
// overload shows as latency; refusing forwarded work is the router's job
// (Policy.BusyQueueThreshold), modelled in route.go.
type engine struct {
	l     *loop
	prof  sim.Profile
	slots *infer.Slots
	base  time.Duration // PrefillBase, rounded as sim does

	running int    // most requests holding a slot at once (<= Profile.Slots)
	queue   []*job // waiting for a slot
	active  []*job // holding one
	units   int    // free compute units
	steps   []*job // waiting for a compute unit
	served  int
}

// job is one request on an engine.
type job struct {
	prompt, reply []int32
	slot, cached  int
	pos, gen      int
	start         time.Duration // submitted
	first         time.Duration // first token out
	prefill       time.Duration // when prefill started
	stepDur       time.Duration
	next          func()
	onFirst       func()
	onDone        func(*infer.Result)
}

// newEngine returns an engine for p that runs at most running requests at
// once (0: p.Slots, as infer/sim does); the other slots only keep cached
// prefixes, as a unified KV cache with more sequences than the server's
// parallel requests does.
func newEngine(l *loop, p sim.Profile, running int) *engine {
	p = p.WithDefaults()
	if running <= 0 || running > p.Slots {
		running = p.Slots
	}
	return &engine{
		l: l, prof: p, running: running,
		slots: infer.NewSlots(p.Slots, p.CacheCells, infer.NopKV{}),
		base:  time.Duration(math.Round(p.PrefillBase * 1e9)),
		units: p.Parallel,
	}
}

// submit queues a request: prompt, then exactly len(reply) generated
// tokens (at least one). onFirst runs when the first token is out, onDone
// with the result when the last one is.
func (e *engine) submit(prompt, reply []int32, onFirst func(), onDone func(*infer.Result)) {
	j := &job{prompt: prompt, reply: reply, start: e.l.now, onFirst: onFirst, onDone: onDone}
	e.queue = append(e.queue, j)
	e.admit()
}

func (e *engine) admit() {
	for len(e.queue) > 0 && len(e.active) < e.running {
		j := e.queue[0]
		room := e.prof.ContextLength - len(j.prompt)
		slot, cached, ok := e.slots.Acquire(j.prompt, min(len(j.reply), max(room, 1)), int64(e.l.now))
		if !ok {
			return
		}
		e.queue[0] = nil
		e.queue = e.queue[1:]
		e.active = append(e.active, j)
		j.slot, j.cached, j.pos = slot, cached, cached
		j.prefill = e.l.now
		e.prefill(j)
	}
}

// prefill runs the next chunk of j's prompt, then decode.
func (e *engine) prefill(j *job) {
	if j.pos >= len(j.prompt) {
		j.first = e.l.now
		j.gen = 1
		if j.onFirst != nil {
			j.onFirst()
		}
		e.decode(j)
		return
	}
	n := min(e.prof.BatchTokens, len(j.prompt)-j.pos)
	d := e.prof.PrefillTime(n, j.pos) // base + chunk
	if j.pos != j.cached {
		d -= e.base
	}
	e.work(j, d, func() {
		e.slots.Append(j.slot, j.prompt[j.pos:j.pos+n]...)
		j.pos += n
		e.prefill(j)
	})
}

// decode generates j's next token, or finishes it.
func (e *engine) decode(j *job) {
	if j.gen >= max(len(j.reply), 1) || len(j.prompt)+j.gen >= e.prof.ContextLength {
		e.finish(j)
		return
	}
	e.work(j, e.prof.DecodeTime(len(j.prompt)+j.gen-1), func() {
		e.slots.Append(j.slot, j.reply[j.gen-1])
		j.gen++
		e.decode(j)
	})
}

// work holds a compute unit for d, then runs then.
func (e *engine) work(j *job, d time.Duration, then func()) {
	if d <= 0 {
		then()
		return
	}
	j.stepDur, j.next = d, then
	if e.units == 0 {
		e.steps = append(e.steps, j)
		return
	}
	e.units--
	e.run(j)
}

func (e *engine) run(j *job) {
	e.l.after(j.stepDur, func() {
		e.units++
		if len(e.steps) > 0 {
			w := e.steps[0]
			e.steps[0] = nil
			e.steps = e.steps[1:]
			e.units--
			e.run(w)
		}
		j.next()
	})
}

func (e *engine) finish(j *job) {
	now := e.l.now
	e.slots.Release(j.slot, int64(now))
	if i := slices.Index(e.active, j); i >= 0 {
		e.active = slices.Delete(e.active, i, i+1)
	}
	e.served++
	res := &infer.Result{
		PromptTokens: len(j.prompt), CachedTokens: j.cached, GeneratedTokens: j.gen,
		QueueWait: j.prefill - j.start, PrefillDuration: j.first - j.prefill,
		TimeToFirst: j.first - j.start, DecodeDuration: now - j.first,
		FinishReason: infer.FinishLength, Slot: j.slot,
	}
	e.admit()
	j.onDone(res)
}

// Stats is infer.Engine's Stats (node.Announce reads it).
func (e *engine) Stats() infer.Stats {
	s := e.slots.Stats()
	return infer.Stats{
		Slots: e.running, Active: len(e.active), Queued: len(e.queue), QueueLimit: e.prof.QueueLimit,
		CacheCells: s.Cells, CacheLimit: s.Capacity, CachedSeqs: s.Leaves, ServedTotal: e.served,
	}
}

// WithCache implements node.CacheHolder.
func (e *engine) WithCache(fn func(*cache.Tree)) { fn(e.slots.Tree()) }

// cachedPrefix is the exact local match.
func (e *engine) cachedPrefix(p []int32) int { return e.slots.Match(p) }

// service is the compute time of a request on this engine with cached
// tokens already held: its whole prefill and decode.
func (e *engine) service(prompt, cached, reply int) time.Duration {
	d := e.prof.PrefillTime(prompt-cached, cached)
	for k := 1; k < reply; k++ {
		d += e.prof.DecodeTime(prompt + k - 1)
	}
	return d
}

// backlog is the compute time of the work the engine holds now: what is
// left of its running requests and the whole of its queued ones (with the
// prefixes cached now), divided among its compute units.
func (e *engine) backlog() time.Duration {
	var d time.Duration
	for _, j := range e.active {
		if j.pos < len(j.prompt) {
			d += e.prof.PrefillTime(len(j.prompt)-j.pos, j.pos)
			if j.pos != j.cached {
				d -= e.base
			}
		}
		for k := max(j.gen, 1); k < len(j.reply); k++ {
			d += e.prof.DecodeTime(len(j.prompt) + k - 1)
		}
	}
	for _, j := range e.queue {
		d += e.service(len(j.prompt), min(e.slots.Match(j.prompt), len(j.prompt)-1), len(j.reply))
	}
	return d / time.Duration(min(e.prof.Parallel, e.running))
}
