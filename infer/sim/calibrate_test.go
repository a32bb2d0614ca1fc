package sim

import (
	"math"
	"testing"
	"testing/synctest"
)

func TestCalibrateRecoversProfile(t *testing.T) {
	for _, want := range []Profile{Presets()[0], Presets()[1], testProfile()} {
		t.Run(want.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEngine(t, want)
				calls := 0
				got, err := Calibrate(t.Context(), e, CalibrateOptions{Seed: 1, Progress: func(done, total int) {
					calls++
					if done != calls || total != 22 {
						t.Errorf("progress %d/%d at call %d", done, total, calls)
					}
				}})
				if err != nil {
					t.Fatal(err)
				}
				if calls != 22 {
					t.Errorf("%d progress calls", calls)
				}
				for _, c := range []struct {
					name      string
					got, want float64
				}{
					{"prefill base", got.PrefillBase, want.PrefillBase},
					{"prefill token", got.PrefillToken, want.PrefillToken},
					{"prefill attention", got.PrefillAttention, want.PrefillAttention},
					{"decode token", got.DecodeToken, want.DecodeToken},
					{"decode attention", got.DecodeAttention, want.DecodeAttention},
				} {
					// Durations are whole nanoseconds: allow that rounding.
					if math.Abs(c.got-c.want) > 1e-3*c.want+1e-10 {
						t.Errorf("%s: got %g, want %g", c.name, c.got, c.want)
					}
				}
				if got.Slots != want.Slots || got.ContextLength != want.ContextLength || got.VocabSize != want.VocabSize ||
					got.CacheCells != want.WithDefaults().CacheCells || got.Name != want.Name {
					t.Errorf("shape: %+v", got)
				}
			})
		})
	}
}

func TestFitterNonNegative(t *testing.T) {
	var f fitter
	// y = 2 + 30x - x^2: the unconstrained fit has a negative x^2 cost.
	for x := range 10 {
		fx := float64(x)
		f.add([]float64{1, fx, fx * fx}, 2+30*fx-fx*fx)
	}
	b, err := f.solve()
	if err != nil {
		t.Fatal(err)
	}
	if b[2] != 0 || b[0] < 0 || b[1] < 20 || b[1] > 30 {
		t.Errorf("coefficients %v, want x^2 fixed at 0", b)
	}
	var empty fitter
	if _, err := empty.solve(); err == nil {
		t.Error("empty fit succeeded")
	}
	var flat fitter
	for range 5 {
		flat.add([]float64{1, 4}, 1) // collinear columns
	}
	if _, err := flat.solve(); err == nil {
		t.Error("singular fit succeeded")
	}
}
