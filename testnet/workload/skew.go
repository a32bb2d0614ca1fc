package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// Skew is the popularity of the items a workload draws from (subjects,
// groups): uniform, or Zipf with exponent S (item of rank k drawn with
// probability proportional to 1/k^S). S may be any value >= 0, unlike
// math/rand's Zipf, which needs S > 1.
type Skew struct {
	Zipf bool
	S    float64
}

// Uniform is the uniform Skew.
var Uniform = Skew{}

// ParseSkew parses "uniform" or "zipf:S" (S >= 0; "zipf" alone is S = 1.1).
func ParseSkew(s string) (Skew, error) {
	switch {
	case s == "" || s == "uniform":
		return Skew{}, nil
	case s == "zipf":
		return Skew{Zipf: true, S: 1.1}, nil
	case strings.HasPrefix(s, "zipf:"):
		v, err := strconv.ParseFloat(strings.TrimPrefix(s, "zipf:"), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || v != v {
			return Skew{}, fmt.Errorf("workload: bad zipf exponent in %q", s)
		}
		return Skew{Zipf: true, S: v}, nil
	}
	return Skew{}, fmt.Errorf("workload: skew %q is not uniform or zipf:S", s)
}

func (k Skew) String() string {
	if !k.Zipf {
		return "uniform"
	}
	return "zipf:" + strconv.FormatFloat(k.S, 'g', -1, 64)
}

// sampler draws item indices 0..n-1 with a Skew. Ranks are dealt to items
// by a seeded shuffle, so the most popular item is not always the first.
type sampler struct {
	cdf  []float64 // by rank
	item []int     // rank -> item
}

func newSampler(k Skew, n int, r *rand.Rand) *sampler {
	s := &sampler{cdf: make([]float64, n), item: r.Perm(n)}
	sum := 0.0
	for i := range n {
		w := 1.0
		if k.Zipf {
			w = math.Pow(float64(i+1), -k.S)
		}
		sum += w
		s.cdf[i] = sum
	}
	for i := range s.cdf {
		s.cdf[i] /= sum
	}
	return s
}

func (s *sampler) draw(r *rand.Rand) int {
	u := r.Float64()
	i := sort.SearchFloat64s(s.cdf, u)
	return s.item[min(i, len(s.item)-1)]
}
