package llama

// The binding (github.com/ollama/ollama/llama) cannot free a context or
// tell its pooling type. These two llama.h functions are declared here and
// resolved at link time against the llama.cpp the binding compiles.

/*
struct llama_context;
extern void llama_free(struct llama_context *ctx);
extern int llama_pooling_type(const struct llama_context *ctx);
*/
import "C"

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// llama.cpp's enum llama_pooling_type.
const (
	poolingNone = 0
	poolingMean = 1
	poolingCLS  = 2
	poolingLast = 3
	poolingRank = 4
)

// contextPtr returns the llama_context* inside the binding's Context (its
// first field, c). Like setKVUnified, it checks the struct by reflection so
// that a binding upgrade which changes it fails loudly here.
func contextPtr(c *llama.Context) (unsafe.Pointer, error) {
	v := reflect.ValueOf(c).Elem()
	if v.NumField() < 1 || v.Type().Field(0).Name != "c" || v.Field(0).Kind() != reflect.Pointer {
		return nil, fmt.Errorf("llama.Context does not start with the C pointer c")
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(v.Field(0).UnsafeAddr())), nil
}

// freeContext frees a llama context (llama_free). The Context must not be
// used afterwards.
func freeContext(p unsafe.Pointer) { C.llama_free((*C.struct_llama_context)(p)) }

// contextPooling is the pooling type a context settled on (llama.cpp
// resolves "unspecified" to the model's).
func contextPooling(p unsafe.Pointer) int {
	return int(C.llama_pooling_type((*C.struct_llama_context)(p)))
}

// setPooling sets llama_context_params.pooling_type, which the binding does
// not expose (found by name, as setKVUnified finds kv_unified).
func setPooling(p *llama.ContextParams, pooling int) error {
	outer := reflect.ValueOf(p).Elem()
	if outer.NumField() != 1 {
		return fmt.Errorf("llama.ContextParams has %d fields, want 1 (the C struct)", outer.NumField())
	}
	cstruct := outer.Field(0)
	f, ok := cstruct.Type().FieldByName("pooling_type")
	if !ok {
		return fmt.Errorf("llama_context_params has no field pooling_type")
	}
	addr := unsafe.Pointer(cstruct.FieldByIndex(f.Index).UnsafeAddr())
	switch f.Type.Kind() {
	case reflect.Int32:
		*(*int32)(addr) = int32(pooling)
	case reflect.Uint32:
		*(*uint32)(addr) = uint32(pooling)
	default:
		return fmt.Errorf("llama_context_params.pooling_type is a %s, want a 32-bit enum", f.Type.Kind())
	}
	return nil
}
