package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModelMeta is what a peer needs to know about a GGUF model before loading
// it: its shape, tokenizer and chat template. It is a plain value.
type ModelMeta struct {
	Name         string `json:"name"`         // general.name, or the file's base name
	Architecture string `json:"architecture"` // general.architecture ("llama", "qwen2")
	// ContextLength is the training context (<arch>.context_length).
	ContextLength int `json:"context_length"`
	// VocabSize is the number of tokens (tokenizer.ggml.tokens).
	VocabSize int `json:"vocab_size"`
	// Parameters is the number of weights, summed over the tensors.
	Parameters uint64 `json:"parameters"`
	// FileType is the weight type ("F32", "F16", "Q4_K_M"): general.file_type,
	// or the most common tensor type when the key is absent.
	FileType string `json:"file_type"`
	// ChatTemplate is the Jinja text of tokenizer.chat_template ("" if none).
	ChatTemplate string `json:"chat_template,omitempty"`
	// TokenizerModel is tokenizer.ggml.model ("llama" = SentencePiece, "gpt2" = BPE).
	TokenizerModel string `json:"tokenizer_model"`
	// BOS and EOS are the begin/end-of-sequence token ids; -1 when unset.
	BOS int32 `json:"bos"`
	EOS int32 `json:"eos"`
	// AddBOS tells whether the tokenizer prepends BOS (tokenizer.ggml.add_bos_token,
	// default true for SentencePiece vocabularies).
	AddBOS bool `json:"add_bos"`

	EmbeddingLength   int `json:"embedding_length"`    // model width
	BlockCount        int `json:"block_count"`         // layers
	HeadCount         int `json:"head_count"`          // attention heads (max over layers)
	HeadCountKV       int `json:"head_count_kv"`       // KV heads (max over layers)
	FeedForwardLength int `json:"feed_forward_length"` // FFN width (max over layers)
	// KeyLength and ValueLength are the widths of one attention head's key
	// and value (<arch>.attention.key_length / value_length; default
	// EmbeddingLength / HeadCount).
	KeyLength   int `json:"key_length,omitempty"`
	ValueLength int `json:"value_length,omitempty"`
	// KVLoraRank is <arch>.attention.kv_lora_rank (multi-head latent
	// attention, DeepSeek-2 style): the KV cache then holds KVLoraRank +
	// RopeDimensions values a layer; 0 for ordinary attention.
	KVLoraRank     int `json:"kv_lora_rank,omitempty"`
	RopeDimensions int `json:"rope_dimensions,omitempty"` // <arch>.rope.dimension_count
	// PoolingType is <arch>.pooling_type, which embedding models declare
	// (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 when
	// absent, as in chat models.
	PoolingType int `json:"pooling_type"`

	Tensors int `json:"tensors"` // number of tensors
}

// ReadModelMeta reads the metadata of the GGUF file at path.
func ReadModelMeta(path string) (ModelMeta, error) {
	g, err := ReadGGUFFile(path)
	if err != nil {
		return ModelMeta{}, err
	}
	m := g.Meta()
	if m.Name == "" {
		m.Name = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	return m, nil
}

// Meta extracts the model metadata from the header.
func (g *GGUFFile) Meta() ModelMeta {
	arch := g.String("general.architecture")
	m := ModelMeta{
		Name:              g.String("general.name"),
		Architecture:      arch,
		ContextLength:     int(g.Uint(arch + ".context_length")),
		ChatTemplate:      g.String("tokenizer.chat_template"),
		TokenizerModel:    g.String("tokenizer.ggml.model"),
		BOS:               g.tokenID("tokenizer.ggml.bos_token_id"),
		EOS:               g.tokenID("tokenizer.ggml.eos_token_id"),
		EmbeddingLength:   int(g.Uint(arch + ".embedding_length")),
		BlockCount:        int(g.Uint(arch + ".block_count")),
		HeadCount:         int(g.Uint(arch + ".attention.head_count")),
		HeadCountKV:       int(g.Uint(arch + ".attention.head_count_kv")),
		FeedForwardLength: int(g.Uint(arch + ".feed_forward_length")),
		KeyLength:         int(g.Uint(arch + ".attention.key_length")),
		ValueLength:       int(g.Uint(arch + ".attention.value_length")),
		KVLoraRank:        int(g.Uint(arch + ".attention.kv_lora_rank")),
		RopeDimensions:    int(g.Uint(arch + ".rope.dimension_count")),
		PoolingType:       -1,
		Tensors:           len(g.Tensors),
	}
	if v, ok := g.KV[arch+".pooling_type"]; ok {
		m.PoolingType = int(min(asUint(v), 1<<16))
	}
	if toks, ok := g.KV["tokenizer.ggml.tokens"].([]string); ok {
		m.VocabSize = len(toks)
	} else if v := g.Uint(arch + ".vocab_size"); v > 0 {
		m.VocabSize = int(v)
	}
	if m.HeadCountKV == 0 {
		m.HeadCountKV = m.HeadCount
	}
	if m.HeadCount > 0 {
		if m.KeyLength == 0 {
			m.KeyLength = m.EmbeddingLength / m.HeadCount
		}
		if m.ValueLength == 0 {
			m.ValueLength = m.EmbeddingLength / m.HeadCount
		}
	}
	m.AddBOS = m.TokenizerModel == "llama"
	if b, ok := g.KV["tokenizer.ggml.add_bos_token"].(bool); ok {
		m.AddBOS = b
	}
	counts := map[uint32]uint64{}
	for _, t := range g.Tensors {
		n := t.Elements()
		m.Parameters += n
		counts[t.Type] += n
	}
	if ft, ok := g.KV["general.file_type"]; ok {
		m.FileType = FileTypeName(uint32(asUint(ft)))
	} else {
		var best uint32
		var most uint64
		for typ, n := range counts {
			if n > most || (n == most && typ < best) {
				best, most = typ, n
			}
		}
		if most > 0 {
			m.FileType = TensorTypeName(best)
		}
	}
	return m
}

// String returns the string value of key, or "".
func (g *GGUFFile) String(key string) string {
	s, _ := g.KV[key].(string)
	return s
}

// Uint returns the value of an integer key as uint64; for an array of
// integers (per-layer values) the largest one; 0 when absent.
func (g *GGUFFile) Uint(key string) uint64 {
	return asUint(g.KV[key])
}

func (g *GGUFFile) tokenID(key string) int32 {
	v, ok := g.KV[key]
	if !ok {
		return -1
	}
	u := asUint(v)
	if u > 1<<31-1 {
		return -1
	}
	return int32(u)
}

func asUint(v any) uint64 {
	switch x := v.(type) {
	case uint8:
		return uint64(x)
	case int8:
		return uint64(max(x, 0))
	case uint16:
		return uint64(x)
	case int16:
		return uint64(max(x, 0))
	case uint32:
		return uint64(x)
	case int32:
		return uint64(max(x, 0))
	case uint64:
		return x
	case int64:
		return uint64(max(x, 0))
	case []uint32:
		return maxOf(x)
	case []int32:
		return maxOf(x)
	case []uint64:
		return maxOf(x)
	case []int64:
		return maxOf(x)
	}
	return 0
}

func maxOf[T uint32 | int32 | uint64 | int64](xs []T) uint64 {
	var m uint64
	for _, x := range xs {
		if x > 0 && uint64(x) > m {
			m = uint64(x)
		}
	}
	return m
}

// FileTypeName names a general.file_type value (llama.cpp's llama_ftype).
func FileTypeName(ft uint32) string {
	names := [...]string{
		0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
		10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
		16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
		22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
		28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
		37: "TQ2_0", 38: "MXFP4",
	}
	if int(ft) < len(names) && names[ft] != "" {
		return names[ft]
	}
	return fmt.Sprintf("ftype%d", ft)
}

// TensorTypeName names a ggml_type value.
func TensorTypeName(t uint32) string {
	names := [...]string{
		0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
		9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
		16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
		22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
		29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
	}
	if int(t) < len(names) && names[t] != "" {
		return names[t]
	}
	return fmt.Sprintf("type%d", t)
}

// statSize returns the size of the file at path.
func statSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
