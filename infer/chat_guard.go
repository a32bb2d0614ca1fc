package infer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// A model's chat template is code that arrives inside a model file, and
// the Jinja engine (github.com/ardanlabs/jinja) has no limits of its own:
// no step budget, no output bound, no recursion limit (an endless macro
// recursion overflows the goroutine stack, which kills the process), and
// a few builtins panic on bad arguments. So a template is guarded before
// it is used:
//
//   - vetTemplate refuses constructs whose cost one expression can blow
//     up: the * operator (string repetition), recursive for loops,
//     replace() with non-literal arguments, tojson/indent widths that are
//     not small literals, deep nesting, long tags, and any use of the
//     guard's own names;
//   - guardTemplate rewrites the source so that every macro call, loop
//     iteration, {{ output }} and {% set %} value is charged to a
//     per-render budget (renderBudget) and macro nesting is bounded; the
//     rewrite only adds {{ }} tags that print nothing and wraps
//     expressions in identity calls, so the output is unchanged (the
//     tests compare it byte for byte on real templates);
//   - range() is replaced by a bounded one, and the render recovers from
//     panics.
//
// Loops cannot be endless (Jinja has no while, and range is bounded), and
// a render takes at most templateSteps iterations and macro calls. What is
// left: a value built inside the budget can still be costly to print when
// it is a list that shares itself many times (a DAG printed by tojson);
// the output is checked after rendering.

// Guard limits.
const (
	// maxTemplateBytes bounds a chat template's source.
	maxTemplateBytes = 1 << 20
	// MaxPromptBytes bounds a rendered prompt (and the input a chat
	// template is given).
	MaxPromptBytes = 16 << 20
	// templateWork is a render's budget: bytes output, set or iterated,
	// plus macro calls and range items.
	templateWork = 4 * MaxPromptBytes
	// templateSteps bounds a render's loop iterations and macro calls (a
	// step costs the engine about a microsecond; real templates take a few
	// per message and tool).
	templateSteps = 250_000
	// maxMacroDepth bounds macro nesting.
	maxMacroDepth = 64
	// maxRangeItems bounds one range() call.
	maxRangeItems = 100_000
	// maxTemplateIndent bounds tojson(indent=N) and indent(N).
	maxTemplateIndent = 16
	// maxBlockDepth, maxBracketDepth and maxTagTokens bound a template's
	// nesting and its tags' length: the engine's parser is quadratic in
	// nesting (100,000 nested ifs take minutes to compile) and long
	// expressions are slow to evaluate.
	maxBlockDepth   = 64
	maxBracketDepth = 32
	maxTagTokens    = 1024
)

// Names the guard adds to a template; a template using them is refused.
const (
	guardPrefix = "_meshllm_"
	guardOut    = guardPrefix + "o"
	guardSet    = guardPrefix + "v"
	guardEnter  = guardPrefix + "enter"
	guardLeave  = guardPrefix + "leave"
	guardTick   = guardPrefix + "tick"
)

// errTemplateBudget is returned when a render exceeds its budget.
var errTemplateBudget = errors.New("chat template exceeds its work budget")

// segment is one piece of a template's source: text, or a tag.
type segment struct {
	kind       byte // 't' text, '{' expression, '%' statement, '#' comment
	start, end int  // the whole segment in the source, delimiters included
	body       string
	trimL      bool
	trimR      bool
}

// scanTemplate splits src into segments the way the Jinja engine's scanner
// does: tags are {{ }}, {% %} and {# #}, a quoted string inside an
// expression or statement may contain the closer, and a '-' next to a
// delimiter is a trim marker.
func scanTemplate(src string) ([]segment, error) {
	var segs []segment
	text := 0
	for i := 0; i+1 < len(src); {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		kind := src[i+1]
		closer := "}}"
		switch kind {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		if i > text {
			segs = append(segs, segment{kind: 't', start: text, end: i, body: src[text:i]})
		}
		start := i
		i += 2
		trimL := i < len(src) && src[i] == '-'
		if trimL {
			i++
		}
		bodyStart := i
		found := false
		for i < len(src) {
			c := src[i]
			if kind != '#' && (c == '\'' || c == '"') {
				i++
				for i < len(src) && src[i] != c {
					if src[i] == '\\' && i+1 < len(src) {
						i++
					}
					i++
				}
				if i < len(src) {
					i++
				}
				continue
			}
			if c == '-' && i+2 < len(src) && src[i+1] == closer[0] && src[i+2] == closer[1] {
				segs = append(segs, segment{kind: kind, start: start, end: i + 3, body: src[bodyStart:i], trimL: trimL, trimR: true})
				i += 3
				found = true
				break
			}
			if c == closer[0] && i+1 < len(src) && src[i+1] == closer[1] {
				segs = append(segs, segment{kind: kind, start: start, end: i + 2, body: src[bodyStart:i], trimL: trimL})
				i += 2
				found = true
				break
			}
			i++
		}
		if !found {
			return nil, fmt.Errorf("unclosed tag at byte %d", start)
		}
		text = i
	}
	if text < len(src) {
		segs = append(segs, segment{kind: 't', start: text, end: len(src), body: src[text:]})
	}
	return segs, nil
}

// token is one lexical token of a tag's body.
type token struct {
	kind byte // 'i' identifier, 'n' number, 's' string, 'p' punctuation
	text string
	pos  int // offset in the body
}

// lexTag splits a tag body into tokens (strings keep their quotes).
func lexTag(body string) []token {
	var toks []token
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(body) && body[j] != c {
				if body[j] == '\\' && j+1 < len(body) {
					j++
				}
				j++
			}
			if j < len(body) {
				j++
			}
			toks = append(toks, token{'s', body[i:j], i})
			i = j
		case isIdentByte(c, true):
			j := i + 1
			for j < len(body) && isIdentByte(body[j], false) {
				j++
			}
			toks = append(toks, token{'i', body[i:j], i})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(body) && (body[j] >= '0' && body[j] <= '9' || body[j] == '.' || body[j] == '_') {
				j++
			}
			toks = append(toks, token{'n', body[i:j], i})
			i = j
		default:
			n := 1
			if i+1 < len(body) {
				switch body[i : i+2] {
				case "**", "==", "!=", "<=", ">=", "//":
					n = 2
				}
			}
			toks = append(toks, token{'p', body[i : i+n], i})
			i += n
		}
	}
	return toks
}

func isIdentByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// stmtKeyword is a statement's first word ("for", "endmacro", ...).
func stmtKeyword(s segment) string {
	b := strings.TrimLeft(s.body, " \t\r\n")
	n := 0
	for n < len(b) && isIdentByte(b[n], n == 0) {
		n++
	}
	return b[:n]
}

// vetTemplate refuses the constructs the guard cannot bound (see above).
func vetTemplate(segs []segment) error {
	blocks := 0
	for _, s := range segs {
		if s.kind != '{' && s.kind != '%' {
			continue
		}
		toks := lexTag(s.body)
		if len(toks) > maxTagTokens {
			return fmt.Errorf("a tag of %d tokens, at most %d", len(toks), maxTagTokens)
		}
		kw := stmtKeyword(s)
		if s.kind == '%' {
			switch {
			case blockOpeners[kw] || kw == "set" && assignIndex(s.body) < 0:
				if blocks++; blocks > maxBlockDepth {
					return fmt.Errorf("blocks nested deeper than %d", maxBlockDepth)
				}
			case strings.HasPrefix(kw, "end"):
				blocks--
			}
		}
		depth := 0
		for i, t := range toks {
			if t.kind == 'p' {
				switch t.text {
				case "(", "[", "{":
					if depth++; depth > maxBracketDepth {
						return fmt.Errorf("brackets nested deeper than %d", maxBracketDepth)
					}
				case ")", "]", "}":
					depth--
				}
			}
			switch {
			case t.kind == 'p' && t.text == "*":
				return fmt.Errorf("uses the * operator: %q", s.body)
			case t.kind == 'i' && strings.HasPrefix(t.text, guardPrefix):
				return fmt.Errorf("uses the reserved name %s", t.text)
			case t.kind == 'i' && t.text == "recursive" && s.kind == '%' && kw == "for":
				return fmt.Errorf("uses a recursive for loop")
			case t.kind == 'i' && t.text == "replace" && next(toks, i, "("):
				if !literalArgs(toks[i+2:], 's', 2) {
					return fmt.Errorf("calls replace with arguments that are not string literals: %q", s.body)
				}
			case t.kind == 'i' && t.text == "indent":
				if next(toks, i, "=") || next(toks, i, "(") && !(next(toks, i+1, ")")) {
					if i+2 >= len(toks) || !smallInt(toks[i+2]) {
						return fmt.Errorf("indents by a width that is not a literal up to %d: %q", maxTemplateIndent, s.body)
					}
				}
			}
		}
	}
	return nil
}

// blockOpeners are the statements that open a block ({% set %} does too
// when it has no "=").
var blockOpeners = map[string]bool{"if": true, "for": true, "macro": true, "call": true, "filter": true, "block": true, "generation": true, "raw": true}

func next(toks []token, i int, p string) bool {
	return i+1 < len(toks) && toks[i+1].kind == 'p' && toks[i+1].text == p
}

// literalArgs tells whether toks (after an opening parenthesis) start with
// at least n literals of kind separated by commas, then optionally a
// number, then ")".
func literalArgs(toks []token, kind byte, n int) bool {
	j := 0
	for k := range n {
		if k > 0 {
			if j >= len(toks) || toks[j].text != "," {
				return false
			}
			j++
		}
		if j >= len(toks) || toks[j].kind != kind {
			return false
		}
		j++
	}
	if j+1 < len(toks) && toks[j].text == "," && toks[j+1].kind == 'n' {
		j += 2
	}
	return j < len(toks) && toks[j].text == ")"
}

func smallInt(t token) bool {
	if t.kind != 'n' {
		return false
	}
	n, err := strconv.Atoi(t.text)
	return err == nil && n >= 0 && n <= maxTemplateIndent
}

// guardTemplate returns src rewritten to charge its work to a
// renderBudget (see the comment at the top of this file).
func guardTemplate(src string, segs []segment) (string, error) {
	// The text bytes inside each macro and loop body, charged per call or
	// iteration.
	weights := make(map[int]int) // segment index of a macro or for tag -> weight
	type open struct {
		i  int
		kw string
	}
	var stack []open
	for i, s := range segs {
		switch {
		case s.kind == 't':
			for _, o := range stack {
				weights[o.i] += len(s.body)
			}
		case s.kind == '%':
			switch kw := stmtKeyword(s); kw {
			case "for", "macro":
				stack = append(stack, open{i, kw})
				weights[i] = 1
			case "endfor", "endmacro":
				if len(stack) == 0 || stack[len(stack)-1].kw != kw[3:] {
					return "", fmt.Errorf("unbalanced {%% %s %%}", kw)
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("unclosed {%% %s %%}", stack[len(stack)-1].kw)
	}

	var b strings.Builder
	b.Grow(len(src) + len(src)/4)
	for i, s := range segs {
		raw := src[s.start:s.end]
		switch s.kind {
		case '{':
			b.WriteString(openTag("{{", s.trimL))
			b.WriteString(" " + guardOut + "(" + s.body + ") ")
			b.WriteString(closeTag("}}", s.trimR))
		case '%':
			switch stmtKeyword(s) {
			case "set":
				if eq := assignIndex(s.body); eq >= 0 {
					b.WriteString(openTag("{%", s.trimL))
					b.WriteString(s.body[:eq+1] + " " + guardSet + "(" + s.body[eq+1:] + ") ")
					b.WriteString(closeTag("%}", s.trimR))
				} else {
					b.WriteString(raw)
				}
			case "macro":
				b.WriteString(raw + "{{ " + guardEnter + "(" + strconv.Itoa(weights[i]) + ") }}")
			case "endmacro":
				b.WriteString("{{ " + guardLeave + "() }}" + raw)
			case "for":
				b.WriteString(raw + "{{ " + guardTick + "(" + strconv.Itoa(weights[i]) + ") }}")
			default:
				b.WriteString(raw)
			}
		default:
			b.WriteString(raw)
		}
	}
	return b.String(), nil
}

func openTag(d string, trim bool) string {
	if trim {
		return d + "-"
	}
	return d
}

func closeTag(d string, trim bool) string {
	if trim {
		return "-" + d
	}
	return d
}

// assignIndex returns the offset of a set statement's assignment '=' (at
// bracket depth 0, outside strings), or -1 for a block set.
func assignIndex(body string) int {
	depth := 0
	for _, t := range lexTag(body) {
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case "=":
			if depth == 0 {
				return t.pos
			}
		}
	}
	return -1
}

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
