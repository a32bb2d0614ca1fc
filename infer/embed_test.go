package infer

import (
	"errors"
	"math"
	"testing"
)

func TestValidateEmbed(t *testing.T) {
	many := make([][]int32, MaxEmbedInputs+1)
	for i := range many {
		many[i] = []int32{1}
	}
	cases := []struct {
		name    string
		inputs  [][]int32
		wantErr error
	}{
		{"ok", [][]int32{{1, 2}, {3}}, nil},
		{"exactly the context", [][]int32{make([]int32, 8)}, nil},
		{"no inputs", nil, ErrBadRequest},
		{"empty input", [][]int32{{1}, {}}, ErrBadRequest},
		{"too many inputs", many, ErrBadRequest},
		{"too long", [][]int32{{1}, make([]int32, 9)}, ErrContextOverflow},
		{"negative token", [][]int32{{1, -1}}, ErrBadRequest},
		{"token past vocabulary", [][]int32{{100}}, ErrBadRequest},
	}
	for _, c := range cases {
		err := ValidateEmbed(c.inputs, 8, 100)
		if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.wantErr)
		}
	}
	var ce *ContextError
	if err := ValidateEmbed([][]int32{make([]int32, 9)}, 8, 0); !errors.As(err, &ce) || ce.PromptTokens != 9 || ce.ContextLength != 8 {
		t.Fatalf("over-long input: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	v := Normalize([]float32{3, 4})
	if math.Abs(float64(v[0])-0.6) > 1e-6 || math.Abs(float64(v[1])-0.8) > 1e-6 {
		t.Fatalf("Normalize(3,4) = %v", v)
	}
	z := Normalize([]float32{0, 0})
	if z[0] != 0 || z[1] != 0 {
		t.Fatalf("zero vector changed: %v", z)
	}
	big := Normalize([]float32{1e30, 1e30})
	if n := math.Hypot(float64(big[0]), float64(big[1])); math.Abs(n-1) > 1e-6 {
		t.Fatalf("large vector norm %g", n)
	}
}
