package main

import (
	"fmt"
	"os"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/llama"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// engineFlags are the flags of every command that loads the real engine.
// Each one also reads MESHLLM_<NAME> and, under `serve`, the YAML key of the
// same name in --config.
func engineFlags() []cli.Flag {
	d := llama.DefaultConfig("")
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "model", Aliases: []string{"m"}, EnvVars: []string{"MESHLLM_MODEL"},
			Usage: "GGUF file, or the name of a model in your Ollama store (e.g. qwen2.5:0.5b)"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "name", EnvVars: []string{"MESHLLM_NAME"},
			Usage: "model name clients use (default: the file or store name)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "slots", Value: d.Slots, EnvVars: []string{"MESHLLM_SLOTS"},
			Usage: "KV slots: requests decoded in parallel, and prefixes kept hot"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "ctx", EnvVars: []string{"MESHLLM_CTX"},
			Usage: "context length per request (default: the model's trained context, as far as --kv-budget holds)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "kv-cells", EnvVars: []string{"MESHLLM_KV_CELLS"},
			Usage: "KV cache size in tokens, shared by all slots (default: slots x ctx within --kv-budget)"}),
		altsrc.NewInt64Flag(&cli.Int64Flag{Name: "kv-budget", EnvVars: []string{"MESHLLM_KV_BUDGET"},
			Usage: "bytes the default KV cache may take (default: 3/4 of available memory minus the model)"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "embed-model", EnvVars: []string{"MESHLLM_EMBED_MODEL"},
			Usage: "GGUF file or Ollama store name of a model that serves /v1/embeddings and /api/embed (default: the served model)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "batch", Value: d.BatchSize, EnvVars: []string{"MESHLLM_BATCH"},
			Usage: "most tokens per llama_decode"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "threads", Value: d.Threads, EnvVars: []string{"MESHLLM_THREADS"},
			Usage: "CPU threads for the engine"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "gpu-layers", Value: d.GPULayers, EnvVars: []string{"MESHLLM_GPU_LAYERS"},
			Usage: "layers to offload to a GPU backend; -1 = all when one is present"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "queue", Value: d.QueueLimit, EnvVars: []string{"MESHLLM_QUEUE"},
			Usage: "requests that may wait for a slot before the peer answers busy"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "flash-attention", EnvVars: []string{"MESHLLM_FLASH_ATTENTION"},
			Usage: "use flash attention where the backend has it"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "kv-type", Value: d.KVType, EnvVars: []string{"MESHLLM_KV_TYPE"},
			Usage: "KV cache type: f16, q8_0 or q4_0"}),
	}
}

// engineConfig resolves --model and builds the engine configuration.
func engineConfig(c *cli.Context) (llama.Config, error) {
	ref := c.String("model")
	if ref == "" {
		return llama.Config{}, fmt.Errorf("no model given: pass --model PATH or the name of a model in your Ollama store")
	}
	m, err := infer.ResolveModel(ref, infer.DefaultStore())
	if err != nil {
		return llama.Config{}, err
	}
	cfg := llama.DefaultConfig(m.Path)
	cfg.Name = c.String("name")
	if cfg.Name == "" {
		cfg.Name = m.Name
	}
	cfg.Slots = c.Int("slots")
	cfg.ContextLength = c.Int("ctx")
	cfg.KVCells = c.Int("kv-cells")
	cfg.KVBudget = c.Int64("kv-budget")
	cfg.BatchSize = c.Int("batch")
	cfg.Threads = c.Int("threads")
	cfg.GPULayers = c.Int("gpu-layers")
	cfg.QueueLimit = c.Int("queue")
	cfg.FlashAttention = c.Bool("flash-attention")
	cfg.KVType = c.String("kv-type")
	return cfg, nil
}

// loadEngine resolves --model and loads it, drawing a progress bar on stderr.
func loadEngine(c *cli.Context) (*llama.Engine, error) {
	cfg, err := engineConfig(c)
	if err != nil {
		return nil, err
	}
	return loadWithProgress(cfg)
}

// loadWithProgress loads cfg with a progress bar and a one-line summary.
func loadWithProgress(cfg llama.Config) (*llama.Engine, error) {
	bar := infer.NewProgress(os.Stderr, "loading "+cfg.Name)
	cfg.Progress = func(f float32) { bar.Update(f) }
	start := time.Now()
	e, err := llama.Load(cfg)
	bar.Done()
	if err != nil {
		return nil, err
	}
	info := e.Info()
	fmt.Fprintf(os.Stderr, "model %s (%s, %s, %d params) loaded in %s\n  %s\n",
		info.Name, info.Architecture, info.Quantization, info.Parameters, time.Since(start).Round(time.Millisecond),
		e.ContextPlan())
	return e, nil
}

// loadEmbedder loads --embed-model when it is set; nil when it is not (the
// served model's engine then computes embeddings itself).
func loadEmbedder(c *cli.Context) (*llama.Embedder, error) {
	ref := c.String("embed-model")
	if ref == "" {
		return nil, nil
	}
	m, err := infer.ResolveModel(ref, infer.DefaultStore())
	if err != nil {
		return nil, err
	}
	cfg := llama.DefaultConfig(m.Path)
	cfg.Name = m.Name
	cfg.Threads = c.Int("threads")
	cfg.GPULayers = c.Int("gpu-layers")
	e, err := llama.LoadEmbedder(cfg)
	if err != nil {
		return nil, fmt.Errorf("--embed-model: %w", err)
	}
	info := e.Info()
	fmt.Fprintf(os.Stderr, "embedding model %s loaded: %d dimensions, inputs up to %d tokens\n",
		info.Name, info.EmbeddingLength, info.EmbedContextLength)
	return e, nil
}

// embeddingsOf is e as the API's Embeddings; nil (no --embed-model) stays
// a nil interface, so the API falls back to the served model.
func embeddingsOf(e *llama.Embedder) httpapi.Embeddings {
	if e == nil {
		return nil
	}
	return e
}
