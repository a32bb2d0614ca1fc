package llama

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
	"github.com/ollama/ollama/ml"
)

// Engine is the llama.cpp implementation of infer.Engine. See the package
// documentation for its scheduling and caching.
type Engine struct {
	cfg   Config
	info  infer.ModelInfo
	meta  infer.ModelMeta
	chat  *infer.ChatFormat
	model *llama.Model
	lctx  *llama.Context

	mu      sync.Mutex // guards queue, slots (for CachedPrefix), stats, closed
	queue   []*job
	slots   *infer.Slots
	active  int
	served  int
	closed  bool
	wake    chan struct{} // cap 1: work arrived or a job was cancelled
	done    chan struct{} // closed when the loop exits
	stopped chan struct{} // closed by Close

	emb embedSlot // the embedding context, created by the first Embed (embed.go)

	vocabOnce sync.Once // builds vocab, for grammar guards (grammar_guard.go)
	vocab     *vocabTables
}

// initOnce guards llama.cpp's process-wide backend initialisation.
var initOnce sync.Once

// Load loads the model in cfg.Model and starts the engine's loop.
func Load(cfg Config) (*Engine, error) {
	f, err := openModel(cfg.Model)
	if err != nil {
		return nil, err
	}
	meta := f.meta
	cfg = cfg.withDefaults(meta, f.st.Size())
	if err := f.nameAndID(&cfg); err != nil {
		return nil, err
	}
	model, err := f.loadWeights(cfg)
	if err != nil {
		return nil, err
	}
	fa := ml.FlashAttentionDisabled
	if cfg.FlashAttention {
		fa = ml.FlashAttentionEnabled
	}
	params := llama.NewContextParams(cfg.KVCells, cfg.BatchSize, cfg.Slots, cfg.Threads, fa, cfg.KVType)
	if err := setKVUnified(&params); err != nil {
		llama.FreeModel(model)
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	lctx, err := llama.NewContextWithModel(model, params)
	if err != nil {
		llama.FreeModel(model)
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	chat := infer.NewChatFormat(meta.ChatTemplate, infer.ChatFormatOptions{
		BOS:    specialText(model, meta.BOS),
		EOS:    specialText(model, meta.EOS),
		AddBOS: model.AddBOSToken(),
	})
	info := f.info(cfg, model)
	info.ContextLength = min(cfg.ContextLength, cfg.KVCells)
	info.Template = string(chat.Family())
	info.ToolFormat = string(chat.ToolFormat())
	e := &Engine{
		cfg:     cfg,
		meta:    meta,
		chat:    chat,
		info:    info,
		model:   model,
		lctx:    lctx,
		slots:   infer.NewSlots(cfg.Slots, cfg.KVCells, kvAdapter{lctx}),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go e.loop()
	return e, nil
}

// kvAdapter exposes the llama context's sequence operations as infer.KV.
type kvAdapter struct{ c *llama.Context }

func (k kvAdapter) SeqRm(seq, p0, p1 int) bool { return k.c.KvCacheSeqRm(seq, p0, p1) }
func (k kvAdapter) SeqCp(src, dst, p0, p1 int) { k.c.KvCacheSeqCp(src, dst, p0, p1) }

// Info implements infer.Engine.
func (e *Engine) Info() infer.ModelInfo { return e.info }

// Config returns the configuration in effect (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// Tokenize implements infer.Engine.
func (e *Engine) Tokenize(text string) ([]int32, error) {
	toks, err := e.model.Tokenize(text, true, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", infer.ErrBadRequest, err)
	}
	out := make([]int32, len(toks))
	for i, t := range toks {
		out[i] = int32(t)
	}
	return out, nil
}

// Render implements infer.Engine with the model's chat format: the
// template family for plain chats, the model's own Jinja chat template (or
// the generic tool format) for chats with tools.
func (e *Engine) Render(messages []infer.Message, tools []infer.Tool) (string, error) {
	return e.chat.Render(messages, tools)
}

// ChatFormat is the model's chat format (why its template is or is not
// used for tools: ChatFormat().JinjaError()).
func (e *Engine) ChatFormat() *infer.ChatFormat { return e.chat }

// specialText is the text of a special token (bos_token, eos_token), or ""
// for none.
func specialText(model *llama.Model, id int32) string {
	if id < 0 || int(id) >= model.NumVocab() {
		return ""
	}
	return model.TokenToPiece(int(id))
}

// CachedPrefix implements infer.Engine.
func (e *Engine) CachedPrefix(tokens []int32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots.Match(tokens)
}

// Stats implements infer.Engine.
func (e *Engine) Stats() infer.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.slots.Stats()
	return infer.Stats{
		Slots:       s.Slots,
		Active:      e.active,
		Queued:      len(e.queue),
		QueueLimit:  e.cfg.QueueLimit,
		CacheCells:  s.Cells,
		CacheLimit:  s.Capacity,
		CachedSeqs:  s.Leaves,
		ServedTotal: e.served,
	}
}

// Close implements infer.Engine.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	close(e.stopped)
	e.mu.Unlock()
	<-e.done
	e.emb.close()
	// The binding has no way to free a context; the loop has exited, so
	// nothing uses this one any more.
	if p, err := contextPtr(e.lctx); err == nil {
		freeContext(p)
	}
	llama.FreeModel(e.model)
	return nil
}

// Generate implements infer.Engine.
func (e *Engine) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	if err := infer.Validate(req, e.info); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	j := newJob(ctx, req, time.Now())
	if err := e.enqueue(j); err != nil {
		return nil, err
	}

	for {
		select {
		case <-j.notify:
		case <-ctx.Done():
			// The loop sees ctx.Done too and frees the slot; wait for it so
			// the slot is free when Generate returns.
			e.poke()
			<-j.finished
			return nil, ctx.Err()
		}
		pieces, res, err, fin := j.take()
		for _, p := range pieces {
			if eerr := emit(p); eerr != nil {
				cancel()
				e.poke()
				<-j.finished
				return nil, eerr
			}
		}
		if fin {
			return res, err
		}
	}
}

// enqueue queues j for the loop and wakes it; ErrClosed after Close,
// ErrBusy past the queue limit.
func (e *Engine) enqueue(j *job) error {
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return infer.ErrClosed
	case len(e.queue) >= e.cfg.QueueLimit:
		e.mu.Unlock()
		return infer.ErrBusy
	}
	e.queue = append(e.queue, j)
	e.mu.Unlock()
	e.poke()
	return nil
}

// poke wakes the loop without blocking.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// WithCache runs fn with the engine's radix tree, under the engine's lock:
// fn must be quick and must not modify the tree (digests read it).
func (e *Engine) WithCache(fn func(*cache.Tree)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e.slots.Tree())
}

// Detokenize renders tokens as text (special tokens included), for labels
// such as the dashboard's hot prefixes. Safe for concurrent use.
func (e *Engine) Detokenize(tokens []int32) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(e.model.TokenToPiece(int(t)))
	}
	return b.String()
}
