package llama

import (
	"runtime"

	"github.com/meshllm/meshllm/infer"
)

// Config configures an Engine. Zero fields take the defaults documented on
// each one (see DefaultConfig).
type Config struct {
	// Model is the GGUF file to load (resolve names with infer.Resolve).
	Model string
	// Name is how clients address the model. Default: the file's base name
	// without extension.
	Name string
	// ID overrides the model identity (an Ollama blob's sha256). Default:
	// infer.ModelID of the file.
	ID string
	// Slots is the number of KV slots (parallel sequences). Default 4: enough
	// to batch a few chats on a desktop while keeping several prefixes hot.
	Slots int
	// ContextLength is the most tokens (prompt + reply) one request may use.
	// Default: the model's training context, capped at 4096.
	ContextLength int
	// KVCells is the KV cache size in tokens, shared by all slots. Default
	// Slots * ContextLength, so every slot can hold a full context at once.
	KVCells int
	// BatchSize is the most tokens decoded in one llama_decode. Default 512,
	// llama.cpp's default ubatch.
	BatchSize int
	// Threads for ggml. Default: the number of CPUs Go sees.
	Threads int
	// GPULayers to offload; -1 offloads all when a GPU backend is present.
	// Default -1. CPU-only builds ignore it.
	GPULayers int
	// QueueLimit is how many requests may wait for a slot before Generate
	// answers infer.ErrBusy. Default 64.
	QueueLimit int
	// FlashAttention enables flash attention where the backend supports it.
	// Default false (auto-detection varies by backend).
	FlashAttention bool
	// KVType is the KV cache element type: "f16" (default), "q8_0", "q4_0".
	KVType string
	// Progress, if set, receives model-load progress in [0, 1].
	Progress func(float32)
}

// DefaultConfig returns a Config for model with every default filled in
// except those that depend on the model file (Name, ID, ContextLength).
func DefaultConfig(model string) Config {
	return Config{
		Model:      model,
		Slots:      4,
		BatchSize:  512,
		Threads:    runtime.NumCPU(),
		GPULayers:  -1,
		QueueLimit: 64,
		KVType:     "f16",
	}
}

// withDefaults fills zero fields from DefaultConfig and the model's metadata.
func (c Config) withDefaults(meta infer.ModelInfo) Config {
	d := DefaultConfig(c.Model)
	if c.Slots <= 0 {
		c.Slots = d.Slots
	}
	if c.BatchSize <= 0 {
		c.BatchSize = d.BatchSize
	}
	if c.Threads <= 0 {
		c.Threads = d.Threads
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = d.QueueLimit
	}
	if c.KVType == "" {
		c.KVType = d.KVType
	}
	if c.ContextLength <= 0 {
		c.ContextLength = min(4096, meta.TrainContextLength)
		if c.ContextLength <= 0 {
			c.ContextLength = 2048
		}
	}
	if c.KVCells <= 0 {
		c.KVCells = c.Slots * c.ContextLength
	}
	c.KVCells = max(c.KVCells, c.ContextLength)
	return c
}
