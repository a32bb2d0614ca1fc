package llama

import (
	"context"
	"fmt"
	"sync"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
)

// Embedder is a model loaded only to compute embeddings (a peer's
// --embed-model, usually a small embedding GGUF beside the chat model): one
// embedding context and no generation slots, so it costs the weights plus
// Config.EmbedContextLength KV cells. It implements infer.Embedder.
//
// Concurrency: all methods are safe for concurrent use; Embed calls take
// turns a batch at a time; Close waits for the batch in flight.
type Embedder struct {
	info      infer.ModelInfo
	model     *llama.Model
	r         *embedRunner
	closeOnce sync.Once
}

// LoadEmbedder loads cfg.Model for embeddings. It uses cfg's Model, Name,
// ID, EmbedContextLength, Threads, GPULayers, FlashAttention, KVType and
// Progress; the generation fields (Slots, ContextLength, KVCells, ...) are
// ignored.
func LoadEmbedder(cfg Config) (*Embedder, error) {
	f, err := openModel(cfg.Model)
	if err != nil {
		return nil, err
	}
	meta := f.meta
	if err := f.nameAndID(&cfg); err != nil {
		return nil, err
	}
	if cfg.Threads <= 0 {
		cfg.Threads = DefaultConfig(cfg.Model).Threads
	}
	cfg.EmbedContextLength = embedContextLength(cfg.EmbedContextLength, meta)
	model, err := f.loadWeights(cfg)
	if err != nil {
		return nil, err
	}
	r, err := newEmbedRunner(model, meta, cfg)
	if err != nil {
		llama.FreeModel(model)
		return nil, err
	}
	info := f.info(cfg, model)
	info.ContextLength = cfg.EmbedContextLength
	return &Embedder{
		model: model,
		r:     r,
		info:  info,
	}, nil
}

// Info describes the model; ContextLength and EmbedContextLength are both
// the longest input Embed accepts.
func (m *Embedder) Info() infer.ModelInfo { return m.info }

// Tokenize turns text into the model's tokens, with the special tokens its
// tokenizer adds (BOS, or an encoder's CLS/SEP).
func (m *Embedder) Tokenize(text string) ([]int32, error) {
	toks, err := m.model.Tokenize(text, true, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", infer.ErrBadRequest, err)
	}
	out := make([]int32, len(toks))
	for i, t := range toks {
		out[i] = int32(t)
	}
	return out, nil
}

// Embed implements infer.Embedder.
func (m *Embedder) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	return m.r.embed(ctx, inputs)
}

// Close frees the model after the batch in flight; later calls to Embed
// fail with infer.ErrClosed. Tokenize must not be called after Close.
func (m *Embedder) Close() error {
	m.closeOnce.Do(func() {
		m.r.close()
		llama.FreeModel(m.model)
	})
	return nil
}
