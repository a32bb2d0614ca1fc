package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/meshllm/meshllm/testnet/workload"
)

// ParseFloats parses a comma-separated list of numbers ("2,200,1000").
func ParseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: %q is not a number", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: empty list %q", s)
	}
	return out, nil
}

// ParseInts parses a comma-separated list of integers.
func ParseInts(s string) ([]int, error) {
	fs, err := ParseFloats(s)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(fs))
	for i, f := range fs {
		if f != float64(int(f)) {
			return nil, fmt.Errorf("bench: %g is not an integer", f)
		}
		out[i] = int(f)
	}
	return out, nil
}

// ParseSkews parses a comma-separated list of skews ("uniform,zipf:1.1").
func ParseSkews(s string) ([]workload.Skew, error) {
	var out []workload.Skew
	for _, f := range strings.Split(s, ",") {
		k, err := workload.ParseSkew(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}
