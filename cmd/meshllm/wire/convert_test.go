package wire

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/p2p"
)

var testClock = time.Unix(1_800_000_000, 0)

// fill sets every field reachable from v (a settable value) to a distinct
// non-zero value: slices get two elements, pointers a filled target.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprint("s", *n))
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), n)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	default:
		t.Fatalf("fill: no rule for %v (a new field kind: extend fill)", v.Type())
	}
}

func filled[T any](t *testing.T) T {
	var x T
	n := 0
	fill(t, reflect.ValueOf(&x).Elem(), &n)
	return x
}

// TestSamplingRoundTrip fills every field of each side's type, so a field
// added to infer.Sampling or p2p.Sampling (or their pieces) that the
// conversions do not carry comes back zero and fails here.
func TestSamplingRoundTrip(t *testing.T) {
	s := filled[infer.Sampling](t)
	if got := SamplingFromWire(SamplingToWire(s)); !reflect.DeepEqual(got, s) {
		t.Fatalf("infer -> wire -> infer:\n got %+v\nwant %+v", got, s)
	}
	w := filled[p2p.Sampling](t)
	if got := SamplingToWire(SamplingFromWire(w)); !reflect.DeepEqual(got, w) {
		t.Fatalf("wire -> infer -> wire:\n got %+v\nwant %+v", got, w)
	}
	if got := SamplingFromWire(SamplingToWire(infer.Sampling{})); !reflect.DeepEqual(got, infer.Sampling{}) {
		t.Fatalf("zero sampling came back as %+v", got)
	}
	p := filled[infer.Piece](t)
	if got := PieceFromWire(PieceToWire(p)); !reflect.DeepEqual(got, p) {
		t.Fatalf("piece infer -> wire -> infer:\n got %+v\nwant %+v", got, p)
	}
	wp := filled[p2p.InferPiece](t)
	if got := PieceToWire(PieceFromWire(wp)); !reflect.DeepEqual(got, wp) {
		t.Fatalf("piece wire -> infer -> wire:\n got %+v\nwant %+v", got, wp)
	}
	// And through the actual bytes: a converted request decodes to the same
	// engine parameters on the serving peer.
	s.TopLogprobs = infer.MaxTopLogprobs
	req := &p2p.InferRequest{ModelID: "m", Prompt: []int32{1}, Sampling: SamplingToWire(s)}
	dec, err := p2p.DecodeInferRequest(req.AppendBinary(nil, testClock), testClock)
	if err != nil {
		t.Fatal(err)
	}
	if got := SamplingFromWire(dec.Sampling); !reflect.DeepEqual(got, s) {
		t.Fatalf("through the wire:\n got %+v\nwant %+v", got, s)
	}
}

// TestLimitsAgree: the wire's limits are the engine's (p2p cannot import
// infer to share them).
func TestLimitsAgree(t *testing.T) {
	if p2p.MaxSchemaLen != infer.MaxSchemaBytes || p2p.MaxAffixLen != infer.MaxAffixBytes || p2p.MaxTopLogprobs != infer.MaxTopLogprobs {
		t.Fatalf("p2p limits %d/%d/%d, infer %d/%d/%d", p2p.MaxSchemaLen, p2p.MaxAffixLen, p2p.MaxTopLogprobs,
			infer.MaxSchemaBytes, infer.MaxAffixBytes, infer.MaxTopLogprobs)
	}
}
