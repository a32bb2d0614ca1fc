package llama

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
)

// modelFile is a GGUF file checked and described before it is loaded.
type modelFile struct {
	st   os.FileInfo
	meta infer.ModelMeta
}

// openModel checks cfg.Model and reads its metadata; a missing or
// unreadable file is an infer.ErrUnknownModel.
func openModel(path string) (modelFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return modelFile{}, fmt.Errorf("%w: %v", infer.ErrUnknownModel, err)
	}
	meta, err := infer.ReadModelMeta(path)
	if err != nil {
		return modelFile{}, fmt.Errorf("%w: %s is not a readable GGUF model: %v", infer.ErrUnknownModel, path, err)
	}
	return modelFile{st: st, meta: meta}, nil
}

// nameAndID fills cfg's Name (the file name without extension) and ID (the
// model's identity) when they are unset.
func (f modelFile) nameAndID(cfg *Config) error {
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(cfg.Model), filepath.Ext(cfg.Model))
	}
	if cfg.ID == "" {
		id, err := infer.ModelID(cfg.Model)
		if err != nil {
			return err
		}
		cfg.ID = id
	}
	return nil
}

// loadWeights initialises llama.cpp once per process and loads the
// weights, every layer on a GPU backend when GPULayers is -1 and one is
// present.
func (f modelFile) loadWeights(cfg Config) (*llama.Model, error) {
	initOnce.Do(llama.BackendInit)
	gpuLayers := cfg.GPULayers
	if gpuLayers < 0 {
		gpuLayers = 0
		if len(llama.EnumerateGPUs()) > 0 {
			gpuLayers = f.meta.BlockCount + 1
		}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(float32) {} // silences llama.cpp's own progress dots
	}
	model, err := llama.LoadModelFromFile(cfg.Model, llama.ModelParams{
		NumGpuLayers: gpuLayers,
		UseMmap:      true,
		Progress:     progress,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %v", infer.ErrEngine, cfg.Model, err)
	}
	return model, nil
}

// info is what ModelInfo says of the file and the loaded weights; callers
// add what depends on their contexts.
func (f modelFile) info(cfg Config, model *llama.Model) infer.ModelInfo {
	return infer.ModelInfo{
		Name:               cfg.Name,
		ID:                 cfg.ID,
		Path:               cfg.Model,
		Architecture:       f.meta.Architecture,
		Parameters:         f.meta.Parameters,
		TrainContextLength: f.meta.ContextLength,
		VocabSize:          model.NumVocab(),
		EmbeddingLength:    model.NEmbd(),
		EmbedContextLength: cfg.EmbedContextLength,
		Quantization:       f.meta.FileType,
		SizeBytes:          f.st.Size(),
		ModifiedAt:         f.st.ModTime(),
	}
}
