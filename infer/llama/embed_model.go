package llama

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	st, err := os.Stat(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", infer.ErrUnknownModel, err)
	}
	meta, err := infer.ReadModelMeta(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a readable GGUF model: %v", infer.ErrUnknownModel, cfg.Model, err)
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(cfg.Model), filepath.Ext(cfg.Model))
	}
	if cfg.ID == "" {
		if cfg.ID, err = infer.ModelID(cfg.Model); err != nil {
			return nil, err
		}
	}
	if cfg.Threads <= 0 {
		cfg.Threads = DefaultConfig(cfg.Model).Threads
	}
	cfg.EmbedContextLength = embedContextLength(cfg.EmbedContextLength, meta)
	initOnce.Do(llama.BackendInit)

	gpuLayers := cfg.GPULayers
	if gpuLayers < 0 {
		gpuLayers = 0
		if len(llama.EnumerateGPUs()) > 0 {
			gpuLayers = meta.BlockCount + 1
		}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(float32) {}
	}
	model, err := llama.LoadModelFromFile(cfg.Model, llama.ModelParams{
		NumGpuLayers: gpuLayers,
		UseMmap:      true,
		Progress:     progress,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %v", infer.ErrEngine, cfg.Model, err)
	}
	r, err := newEmbedRunner(model, meta, cfg)
	if err != nil {
		llama.FreeModel(model)
		return nil, err
	}
	return &Embedder{
		model: model,
		r:     r,
		info: infer.ModelInfo{
			Name:               cfg.Name,
			ID:                 cfg.ID,
			Path:               cfg.Model,
			Architecture:       meta.Architecture,
			Parameters:         meta.Parameters,
			ContextLength:      cfg.EmbedContextLength,
			TrainContextLength: meta.ContextLength,
			VocabSize:          model.NumVocab(),
			EmbeddingLength:    model.NEmbd(),
			EmbedContextLength: cfg.EmbedContextLength,
			Quantization:       meta.FileType,
			SizeBytes:          st.Size(),
			ModifiedAt:         st.ModTime(),
		},
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
