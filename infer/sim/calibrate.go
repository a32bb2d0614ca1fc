package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/meshllm/meshllm/infer"
)

// CalibrateOptions say what Calibrate measures. Zero fields take defaults.
type CalibrateOptions struct {
	// ColdLengths are the prompt lengths measured with nothing cached;
	// default 16, 64, 128, 256, 512 (clipped to the context).
	ColdLengths []int
	// WarmPrefix is the cached prefix of the warm runs; default 256.
	WarmPrefix int
	// WarmSuffixes are the uncached lengths after it; default 16, 64, 128.
	WarmSuffixes []int
	// DecodeTokens is the reply length of every run; default 16.
	DecodeTokens int
	// Repeats is how many times each shape runs; default 2.
	Repeats int
	// Seed makes the random prompts reproducible.
	Seed uint64
	// Progress, when set, is called after each run with (done, total).
	Progress func(done, total int)
}

func (o CalibrateOptions) withDefaults(ctxLen int) CalibrateOptions {
	if len(o.ColdLengths) == 0 {
		o.ColdLengths = []int{16, 64, 128, 256, 512}
	}
	if o.WarmPrefix <= 0 {
		o.WarmPrefix = 256
	}
	if len(o.WarmSuffixes) == 0 {
		o.WarmSuffixes = []int{16, 64, 128}
	}
	if o.DecodeTokens <= 0 {
		o.DecodeTokens = 16
	}
	if o.Repeats <= 0 {
		o.Repeats = 2
	}
	limit := ctxLen - o.DecodeTokens - 1
	clip := func(xs []int) []int {
		var out []int
		for _, x := range xs {
			if x >= 2 && x <= limit {
				out = append(out, x)
			}
		}
		return out
	}
	o.ColdLengths = clip(o.ColdLengths)
	o.WarmPrefix = min(o.WarmPrefix, limit/2)
	o.WarmSuffixes = clip(o.WarmSuffixes)
	for i, s := range o.WarmSuffixes {
		o.WarmSuffixes[i] = min(s, limit-o.WarmPrefix)
	}
	return o
}

// Calibrate measures eng and fits a Profile to it. It sends cold prompts
// (random tokens, so nothing is cached) of several lengths and warm ones
// that share a cached prefix, each decoding DecodeTokens tokens greedily,
// and fits the prefill model to the (uncached, cached, prefill time)
// triples and the decode model to the decode times, by least squares on the
// engine's own Result timings (so queueing and HTTP are not measured).
// Slots, queue limit, cache size, context and vocabulary come from eng.
// Parallel is left at 1 (one compute unit, as on a CPU): set it by hand for
// a GPU.
func Calibrate(ctx context.Context, eng infer.Engine, opts CalibrateOptions) (Profile, error) {
	info, st := eng.Info(), eng.Stats()
	if info.VocabSize < 16 || info.ContextLength < 64 {
		return Profile{}, fmt.Errorf("calibrate: model too small (vocab %d, context %d)", info.VocabSize, info.ContextLength)
	}
	o := opts.withDefaults(info.ContextLength)
	if len(o.ColdLengths) < 2 {
		return Profile{}, fmt.Errorf("calibrate: need two cold lengths that fit the context %d", info.ContextLength)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x6d65736863616c))
	// Ids from 3 on avoid the usual special tokens; a random sequence
	// never repeats a cached one.
	random := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = 3 + int32(rng.IntN(min(info.VocabSize, 32000)-3))
		}
		return out
	}
	total := o.Repeats * (len(o.ColdLengths) + len(o.WarmSuffixes)*2)
	done := 0
	var pre, dec fitter
	run := func(prompt []int32) error {
		res, err := eng.Generate(ctx, infer.Request{Prompt: prompt, Sampling: infer.Sampling{
			Temperature: 0, Seed: 1, MaxTokens: o.DecodeTokens,
		}}, func(infer.Piece) error { return nil })
		if err != nil {
			return fmt.Errorf("calibrate: %d-token prompt: %w", len(prompt), err)
		}
		u, c := float64(res.PromptTokens-res.CachedTokens), float64(res.CachedTokens)
		pre.add([]float64{1, u, u*c + u*(u-1)/2}, res.PrefillDuration.Seconds())
		if n := float64(res.GeneratedTokens - 1); n > 0 {
			l := float64(res.PromptTokens)
			dec.add([]float64{n, n*l + n*(n-1)/2}, res.DecodeDuration.Seconds())
		}
		done++
		if o.Progress != nil {
			o.Progress(done, total)
		}
		return nil
	}
	for range o.Repeats {
		for _, n := range o.ColdLengths {
			if err := run(random(n)); err != nil {
				return Profile{}, err
			}
		}
		for _, s := range o.WarmSuffixes {
			prefix := random(o.WarmPrefix)
			// The first run caches the prefix; the second reuses it.
			if err := run(append(prefix, random(s)...)); err != nil {
				return Profile{}, err
			}
			if err := run(append(prefix[:len(prefix):len(prefix)], random(s)...)); err != nil {
				return Profile{}, err
			}
		}
	}
	pc, err := pre.solve()
	if err != nil {
		return Profile{}, fmt.Errorf("calibrate: prefill fit: %w", err)
	}
	dc, err := dec.solve()
	if err != nil {
		return Profile{}, fmt.Errorf("calibrate: decode fit: %w", err)
	}
	p := Profile{
		Name:             info.Name,
		Description:      fmt.Sprintf("calibrated on %s (%s, %d runs)", info.Name, info.Quantization, done),
		Parameters:       info.Parameters,
		ContextLength:    info.ContextLength,
		VocabSize:        info.VocabSize,
		Slots:            max(st.Slots, 1),
		Parallel:         1,
		CacheCells:       st.CacheLimit,
		QueueLimit:       st.QueueLimit,
		PrefillBase:      pc[0],
		PrefillToken:     pc[1],
		PrefillAttention: pc[2],
		DecodeToken:      dc[0],
		DecodeAttention:  dc[1],
	}
	return p, p.Validate()
}

// fitter accumulates least-squares normal equations for y ~ x·beta.
type fitter struct {
	ata [][]float64
	aty []float64
	n   int
}

func (f *fitter) add(x []float64, y float64) {
	if f.ata == nil {
		f.ata = make([][]float64, len(x))
		for i := range f.ata {
			f.ata[i] = make([]float64, len(x))
		}
		f.aty = make([]float64, len(x))
	}
	for i := range x {
		for j := range x {
			f.ata[i][j] += x[i] * x[j]
		}
		f.aty[i] += x[i] * y
	}
	f.n++
}

// solve returns the non-negative least-squares coefficients: it solves the
// normal equations and, while a coefficient comes out negative (a cost
// cannot be), fixes the most negative at zero and solves for the rest.
func (f *fitter) solve() ([]float64, error) {
	if f.n == 0 {
		return nil, errors.New("no measurements")
	}
	k := len(f.aty)
	free := make([]bool, k)
	for i := range free {
		free[i] = true
	}
	for {
		beta, err := f.solveFree(free)
		if err != nil {
			return nil, err
		}
		worst := -1
		for i, b := range beta {
			if free[i] && b < 0 && (worst < 0 || b < beta[worst]) {
				worst = i
			}
		}
		if worst < 0 {
			return beta, nil
		}
		free[worst] = false
	}
}

// solveFree solves the normal equations restricted to the free
// coefficients (the others are zero), by Gaussian elimination with partial
// pivoting, after scaling each column to unit diagonal.
func (f *fitter) solveFree(free []bool) ([]float64, error) {
	var idx []int
	for i, ok := range free {
		if ok {
			idx = append(idx, i)
		}
	}
	n := len(idx)
	beta := make([]float64, len(free))
	if n == 0 {
		return beta, nil
	}
	scale := make([]float64, n)
	for a, i := range idx {
		scale[a] = math.Sqrt(f.ata[i][i])
		if scale[a] == 0 {
			scale[a] = 1
		}
	}
	m := make([][]float64, n)
	for a, i := range idx {
		m[a] = make([]float64, n+1)
		for b, j := range idx {
			m[a][b] = f.ata[i][j] / (scale[a] * scale[b])
		}
		m[a][n] = f.aty[i] / scale[a]
	}
	for col := range n {
		piv := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[piv][col]) {
				piv = r
			}
		}
		if math.Abs(m[piv][col]) < 1e-12 {
			return nil, errors.New("measurements do not determine the model (vary the prompt lengths)")
		}
		m[col], m[piv] = m[piv], m[col]
		for r := range n {
			if r == col {
				continue
			}
			k := m[r][col] / m[col][col]
			for c := col; c <= n; c++ {
				m[r][c] -= k * m[col][c]
			}
		}
	}
	for a, i := range idx {
		beta[i] = m[a][n] / m[a][a] / scale[a]
	}
	return beta, nil
}
