package infer

import "testing"

// TestMetaAttentionShape covers the keys the KV budget and the embedding
// pooling read: key/value widths (explicit or derived), latent attention
// and pooling type.
func TestMetaAttentionShape(t *testing.T) {
	bert := (&GGUFFile{KV: map[string]any{
		"general.architecture":      "bert",
		"bert.embedding_length":     uint32(768),
		"bert.attention.head_count": uint32(12),
		"bert.pooling_type":         uint32(2),
	}}).Meta()
	if bert.KeyLength != 64 || bert.ValueLength != 64 || bert.HeadCountKV != 12 || bert.PoolingType != 2 {
		t.Errorf("bert: %+v", bert)
	}
	ds := (&GGUFFile{KV: map[string]any{
		"general.architecture":              "deepseek2",
		"deepseek2.embedding_length":        uint32(2048),
		"deepseek2.attention.head_count":    uint32(16),
		"deepseek2.attention.key_length":    uint32(192),
		"deepseek2.attention.value_length":  uint32(128),
		"deepseek2.attention.kv_lora_rank":  uint32(512),
		"deepseek2.rope.dimension_count":    uint32(64),
		"deepseek2.attention.head_count_kv": []int32{16, 16, 0},
	}}).Meta()
	if ds.KeyLength != 192 || ds.ValueLength != 128 || ds.KVLoraRank != 512 || ds.RopeDimensions != 64 ||
		ds.HeadCountKV != 16 || ds.PoolingType != -1 {
		t.Errorf("deepseek2: %+v", ds)
	}
	none := (&GGUFFile{KV: map[string]any{"general.architecture": "mamba"}}).Meta()
	if none.KeyLength != 0 || none.PoolingType != -1 {
		t.Errorf("no heads: %+v", none)
	}
}
