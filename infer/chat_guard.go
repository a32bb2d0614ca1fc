package infer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
