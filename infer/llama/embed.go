package llama

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
	"github.com/ollama/ollama/ml"
)

// Embeddings run on a second llama context on the same model (an
// embedRunner), never on the generation loop's: generation's KV cache, its
// slots and its batch are untouched, and the two contexts decode
// concurrently (llama.cpp shares a model's read-only weights between
// contexts). Each runner decodes one packed batch at a time.
//
// Pooling is llama.cpp's, inside the graph: every token of an input is an
// output, and the whole input must sit in one micro-batch, so the context's
// n_ubatch equals its n_ctx (Config.EmbedContextLength) and that is also the
// longest input. Inputs are packed in order, up to embedMaxSeqs sequences
// and n_ctx tokens a decode, each its own sequence id (the unified KV cache
// keeps llama.cpp's batch split simple: one decode, one micro-batch).

// embedMaxSeqs is the most inputs one embedding decode packs.
const embedMaxSeqs = 32

// Embed implements infer.Embedder with the engine's model. The first call
// creates the embedding context (Config.EmbedContextLength cells). It is
// safe for concurrent use, with other Embed calls (they take turns a batch
// at a time) and with generation. ctx is checked between batches.
func (e *Engine) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if err := infer.ValidateEmbed(inputs, e.cfg.EmbedContextLength, e.info.VocabSize); err != nil {
		return nil, err
	}
	r, err := e.emb.get(func() (*embedRunner, error) { return newEmbedRunner(e.model, e.meta, e.cfg) })
	if err != nil {
		return nil, err
	}
	return r.embed(ctx, inputs)
}

// embedSlot holds an Engine's embedding runner, created on first use. Its
// zero value is ready. Safe for concurrent use.
type embedSlot struct {
	mu     sync.Mutex // guards r and closed; held while creating r
	r      *embedRunner
	closed bool
}

// get returns the runner, creating it with create on first use; after close
// it fails with infer.ErrClosed. A failed creation is retried by the next
// call.
func (s *embedSlot) get(create func() (*embedRunner, error)) (*embedRunner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, infer.ErrClosed
	}
	if s.r == nil {
		r, err := create()
		if err != nil {
			return nil, err
		}
		s.r = r
	}
	return s.r, nil
}

// close frees the runner, waiting for a batch in flight.
func (s *embedSlot) close() {
	s.mu.Lock()
	s.closed = true
	r := s.r
	s.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// embedRunner owns one embedding llama context and its batch. Safe for
// concurrent use: decoding takes turn.
type embedRunner struct {
	lctx  *llama.Context
	cptr  unsafe.Pointer // lctx's llama_context*, for llama_free
	batch *llama.Batch
	nCtx  int // the longest input and the most tokens a decode holds
	nEmbd int
	vocab int

	turn      chan struct{} // cap 1: full while a goroutine decodes (or after close)
	done      chan struct{} // closed by close
	closeOnce sync.Once
}

// embedPooling is the pooling the embedding context uses: the model's when
// it declares mean, CLS or last-token pooling; mean otherwise (a chat model
// has none; a reranker's "rank" pooling yields scores, not embeddings).
func embedPooling(meta infer.ModelMeta) int {
	switch meta.PoolingType {
	case poolingMean, poolingCLS, poolingLast:
		return meta.PoolingType
	}
	return poolingMean
}

// newEmbedRunner creates an embedding context on model: cfg.EmbedContextLength
// cells and micro-batch, cfg's threads, KV type and flash attention.
func newEmbedRunner(model *llama.Model, meta infer.ModelMeta, cfg Config) (*embedRunner, error) {
	n := cfg.EmbedContextLength
	if n <= 0 || n > maxEmbedContext {
		return nil, fmt.Errorf("%w: embedding context %d out of range [1, %d]", infer.ErrEngine, n, maxEmbedContext)
	}
	fa := ml.FlashAttentionDisabled
	if cfg.FlashAttention {
		fa = ml.FlashAttentionEnabled
	}
	params := llama.NewContextParams(n, n, embedMaxSeqs, max(cfg.Threads, 1), fa, cfg.KVType)
	if err := setKVUnified(&params); err != nil {
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	pooling := embedPooling(meta)
	if err := setPooling(&params, pooling); err != nil {
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	lctx, err := llama.NewContextWithModel(model, params)
	if err != nil {
		return nil, fmt.Errorf("%w: embedding context: %v", infer.ErrEngine, err)
	}
	cptr, err := contextPtr(lctx)
	if err != nil {
		// Without the pointer the context cannot be freed; this only
		// happens on a binding upgrade, which the tests catch.
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	if got := contextPooling(cptr); got != pooling {
		freeContext(cptr)
		return nil, fmt.Errorf("%w: embedding context pools with type %d, want %d", infer.ErrEngine, got, pooling)
	}
	batch, err := llama.NewBatch(n, 1, 0)
	if err != nil {
		freeContext(cptr)
		return nil, fmt.Errorf("%w: %v", infer.ErrEngine, err)
	}
	return &embedRunner{
		lctx:  lctx,
		cptr:  cptr,
		batch: batch,
		nCtx:  n,
		nEmbd: model.NEmbd(),
		vocab: model.NumVocab(),
		turn:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}, nil
}

// embed validates inputs and embeds them batch by batch, in order.
func (r *embedRunner) embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if err := infer.ValidateEmbed(inputs, r.nCtx, r.vocab); err != nil {
		return nil, err
	}
	out := make([][]float32, len(inputs))
	for start := 0; start < len(inputs); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := packEmbedBatch(inputs, start, r.nCtx, embedMaxSeqs)
		if err := r.decode(ctx, inputs[start:end], out[start:end]); err != nil {
			return nil, err
		}
		start = end
	}
	return out, nil
}

// packEmbedBatch returns the end of the batch starting at inputs[start]:
// as many inputs as fit in maxTokens tokens and maxSeqs sequences, at least
// one (each input is at most maxTokens long).
func packEmbedBatch(inputs [][]int32, start, maxTokens, maxSeqs int) int {
	end, tokens := start, 0
	for end < len(inputs) && end-start < maxSeqs && (end == start || tokens+len(inputs[end]) <= maxTokens) {
		tokens += len(inputs[end])
		end++
	}
	return end
}

// decode embeds one packed batch into out, taking the runner's turn.
func (r *embedRunner) decode(ctx context.Context, seqs [][]int32, out [][]float32) error {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return infer.ErrClosed
	}
	defer func() { <-r.turn }()
	select {
	case <-r.done:
		return infer.ErrClosed
	default:
	}
	r.lctx.KvCacheClear() // the previous batch's cells; a no-op for encoder-only models
	r.batch.Clear()
	for s, in := range seqs {
		for pos, tok := range in {
			r.batch.Add(int(tok), nil, pos, true, s)
		}
	}
	if err := r.lctx.Decode(r.batch); err != nil {
		return fmt.Errorf("%w: embedding decode: %v", infer.ErrEngine, err)
	}
	for s := range seqs {
		v := r.lctx.GetEmbeddingsSeq(s)
		if len(v) != r.nEmbd {
			return fmt.Errorf("%w: no pooled embedding for sequence %d", infer.ErrEngine, s)
		}
		out[s] = infer.Normalize(v)
	}
	return nil
}

// close waits for a batch in flight, then frees the context and batch.
// Later calls fail with infer.ErrClosed.
func (r *embedRunner) close() {
	r.closeOnce.Do(func() {
		close(r.done)
		r.turn <- struct{}{} // held for good: nobody decodes again
		r.batch.Free()
		freeContext(r.cptr)
	})
}
