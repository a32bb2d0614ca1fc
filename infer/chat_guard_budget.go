package infer

import (
	"fmt"

	"github.com/ardanlabs/jinja"
)

// renderBudget is one render's account. It is used by one render (one
// goroutine) only.
type renderBudget struct {
	work  int
	steps int
	depth int
}

func (r *renderBudget) charge(n int) error {
	r.work += max(n, 1)
	if r.work > templateWork {
		return errTemplateBudget
	}
	return nil
}

// step charges a loop iteration or macro call of weight n.
func (r *renderBudget) step(n int) error {
	r.steps++
	if r.steps > templateSteps {
		return fmt.Errorf("%w: more than %d loop iterations and macro calls", errTemplateBudget, templateSteps)
	}
	return r.charge(n)
}

// globals returns the guard's functions and the bounded range for one
// render.
func (r *renderBudget) globals() map[string]jinja.Value {
	identity := func(name string, size func(jinja.Value) int) jinja.Value {
		return jinja.NewCallable(name, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) == 0 {
				return jinja.NewString(""), nil
			}
			return args[0], r.charge(size(args[0]))
		})
	}
	weight := func(args []jinja.Value) int {
		if len(args) > 0 && args[0].IsInt() {
			return int(min(args[0].AsInt(), templateWork+1))
		}
		return 1
	}
	empty := jinja.NewString("")
	return map[string]jinja.Value{
		guardOut: identity(guardOut, printedSize),
		guardSet: identity(guardSet, shallowSize),
		guardEnter: jinja.NewCallable(guardEnter, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			r.depth++
			if r.depth > maxMacroDepth {
				return empty, fmt.Errorf("chat template nests macros deeper than %d", maxMacroDepth)
			}
			return empty, r.step(weight(args))
		}),
		guardLeave: jinja.NewCallable(guardLeave, func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
			r.depth--
			return empty, nil
		}),
		guardTick: jinja.NewCallable(guardTick, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			return empty, r.step(weight(args))
		}),
		"range": jinja.NewCallable("range", r.rangeFn),
	}
}

// rangeFn is Python's range, bounded by maxRangeItems and the budget.
func (r *renderBudget) rangeFn(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	var start, stop, step int64 = 0, 0, 1
	for _, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range: arguments must be integers")
		}
	}
	switch len(args) {
	case 1:
		stop = args[0].AsInt()
	case 2:
		start, stop = args[0].AsInt(), args[1].AsInt()
	case 3:
		start, stop, step = args[0].AsInt(), args[1].AsInt(), args[2].AsInt()
	default:
		return jinja.Undefined(), fmt.Errorf("range: expected 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return jinja.Undefined(), fmt.Errorf("range: step must not be zero")
	}
	var items []jinja.Value
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(items) == maxRangeItems {
			return jinja.Undefined(), fmt.Errorf("range: more than %d items", maxRangeItems)
		}
		items = append(items, jinja.NewInt(i))
	}
	return jinja.NewList(items), r.charge(len(items))
}

// printedSize is what printing v costs.
func printedSize(v jinja.Value) int {
	if v.IsString() {
		return len(v.AsString())
	}
	if v.IsList() || v.IsDict() {
		return len(v.String())
	}
	return 1
}

// shallowSize is what storing v costs: a string's bytes, a list's or a
// dict's entries.
func shallowSize(v jinja.Value) int {
	switch {
	case v.IsString():
		return len(v.AsString())
	case v.IsList():
		return v.AsList().Len()
	case v.IsDict():
		return v.AsDict().Len()
	}
	return 1
}
