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
	// Default: the model's training context, unless the KV cache that needs
	// exceeds KVBudget (see KVCells); an explicit value wins over the budget
	// but not over the training context.
	ContextLength int
	// KVCells is the KV cache size in tokens, shared by all slots. Default
	// Slots * ContextLength, so every slot can hold a full context at once,
	// capped to what KVBudget holds (at least min(trained, 2048)); when that
	// caps it below ContextLength, ContextLength drops to KVCells. An
	// explicit value wins over the budget, bounded by Slots * trained.
	KVCells int
	// KVBudget is the most bytes the default KV cache may take. Default:
	// 3/4 of the memory available at load (Linux MemAvailable, or a cgroup
	// v2 limit's remainder) less the model file's size; 4 GiB where that
	// cannot be read. It is host memory: with GPU offload set it to what the
	// GPU can spare. Engine.ContextPlan reports the outcome.
	KVBudget int64
	// EmbedContextLength is the longest input Embed accepts, and the most
	// tokens one embedding llama_decode holds (each input is pooled within
	// one decode). Embeddings use a second llama context with this many KV
	// cells, created on the first Embed; its output buffer takes
	// (n_vocab + n_embd) × 4 bytes a token. Default: 2048 for a model that
	// declares a pooling type (an embedding model), 512 otherwise (a chat
	// model's large vocabulary makes that buffer costly), capped at the
	// training context.
	EmbedContextLength int
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

	// plan is how withDefaults sized ContextLength and KVCells.
	plan ContextPlan
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

// withDefaults fills zero fields from DefaultConfig and the model's
// metadata, and sizes the context and KV cache (planContext) within
// KVBudget; modelBytes is the model file's size. It reads the machine's
// available memory when KVBudget is unset.
func (c Config) withDefaults(meta infer.ModelMeta, modelBytes int64) Config {
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
	source := "Config.KVBudget"
	if c.KVBudget <= 0 {
		avail, ok := availableMemory()
		c.KVBudget, source = defaultKVBudget(avail, ok, modelBytes)
	}
	c.plan = planContext(planInput{
		trained:       meta.ContextLength,
		slots:         c.Slots,
		contextLength: c.ContextLength,
		kvCells:       c.KVCells,
		bytesPerCell:  kvBytesPerCell(meta, c.KVType),
		budget:        c.KVBudget,
		budgetSource:  source,
	})
	c.ContextLength, c.KVCells = c.plan.ContextLength, c.plan.KVCells
	c.EmbedContextLength = embedContextLength(c.EmbedContextLength, meta)
	return c
}

// Embedding context defaults (see Config.EmbedContextLength).
const (
	embedContextEmbedding = 2048
	embedContextChat      = 512
	maxEmbedContext       = 1 << 16
)

// embedContextLength resolves Config.EmbedContextLength: the default by
// the model's kind, an explicit value bounded by the trained context and
// maxEmbedContext (its square sizes llama.cpp's attention buffers).
func embedContextLength(n int, meta infer.ModelMeta) int {
	if n <= 0 {
		n = embedContextChat
		if meta.PoolingType >= 0 {
			n = embedContextEmbedding
		}
	}
	if meta.ContextLength > 0 {
		n = min(n, meta.ContextLength)
	}
	return min(n, maxEmbedContext)
}
