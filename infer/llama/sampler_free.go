package llama

// The binding (github.com/ollama/ollama/llama) frees a sampler only from a
// finalizer, so its C memory — a vocabulary-sized candidate buffer, the
// penalties' ring of repeat_last_n tokens, a grammar — stays until a GC
// cycle happens to run it. freeSampler frees it when the sequence ends.
// common_sampler_cfree is the binding's own C function (sampling_ext.h),
// resolved at link time.

/*
struct common_sampler;
extern void common_sampler_cfree(struct common_sampler *sampler);
*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// samplerPtr returns the common_sampler* inside the binding's
// SamplingContext (its only field, c), checked by reflection so that a
// binding upgrade which changes the struct fails loudly here.
func samplerPtr(s *llama.SamplingContext) (unsafe.Pointer, error) {
	v := reflect.ValueOf(s).Elem()
	if v.NumField() != 1 || v.Type().Field(0).Name != "c" || v.Field(0).Kind() != reflect.Pointer {
		return nil, fmt.Errorf("llama.SamplingContext is not one C pointer c")
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(v.Field(0).UnsafeAddr())), nil
}

// freeSampler frees s now and removes the binding's finalizer (which would
// free it again). s must not be used afterwards. If the struct is not what
// samplerPtr expects, s is left to its finalizer.
func freeSampler(s *llama.SamplingContext) {
	if s == nil {
		return
	}
	p, err := samplerPtr(s)
	if err != nil || p == nil {
		return
	}
	runtime.SetFinalizer(s, nil)
	C.common_sampler_cfree((*C.struct_common_sampler)(p))
}
