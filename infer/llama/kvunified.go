package llama

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// setKVUnified turns on llama_context_params.kv_unified, which the ollama
// wrapper does not expose. Without it llama.cpp gives each sequence its own
// KV stream, and copying a partial prefix between sequences aborts the
// process (llama_kv_cache::seq_cp asserts "only supported for full KV
// buffers"). With it, a copied prefix shares its cells: prefix reuse across
// slots is free and the radix tree counts cells exactly.
//
// The field is found by name through reflection on the cgo struct, so a
// wrapper upgrade that moves or renames it fails loudly here, not silently.
func setKVUnified(p *llama.ContextParams) error {
	outer := reflect.ValueOf(p).Elem()
	if outer.NumField() != 1 {
		return fmt.Errorf("llama.ContextParams has %d fields, want 1 (the C struct)", outer.NumField())
	}
	cstruct := outer.Field(0)
	f, ok := cstruct.Type().FieldByName("kv_unified")
	if !ok || f.Type.Kind() != reflect.Bool {
		return fmt.Errorf("llama_context_params has no bool field kv_unified")
	}
	field := cstruct.FieldByIndex(f.Index)
	*(*bool)(unsafe.Pointer(field.UnsafeAddr())) = true
	return nil
}
