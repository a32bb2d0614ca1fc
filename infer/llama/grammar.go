package llama

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/meshllm/meshllm/infer"
	"github.com/ollama/ollama/llama"
)

// maxGrammarRepeats bounds the repetition counts ({m,n}) of a constraint's
// grammar, summed. llama.cpp's grammar parser expands S{m,n} into about n
// rules and caps each count at 2,000, but not their total: a 64 KiB schema
// full of maxLength bounds would otherwise cost millions of rules.
const maxGrammarRepeats = 1 << 15

// valueRule is the name the schema's own root rule is renamed to; the
// grammar's root becomes Prefix, that rule, Suffix.
const valueRule = "meshllm-value"

// constraintGrammar builds the GBNF grammar that enforces c: Prefix, one
// JSON value satisfying c.JSONSchema, Suffix. Every way the schema or the
// grammar can be bad is an infer.ErrBadRequest, found here rather than by
// llama.cpp's sampler (which, given a grammar it cannot parse, keeps a
// null sampler in its chain and crashes on first use). Safe for concurrent
// use: it touches no engine state.
func constraintGrammar(c *infer.Constraint) (string, error) {
	schema := []byte(c.JSONSchema)
	g := llama.SchemaToGrammar(schema)
	if g == nil {
		return "", infer.BadRequestf("json schema cannot be turned into a grammar: llama.cpp's json-schema-to-grammar rejects it (unknown type or format, unresolvable $ref, unsupported pattern?)")
	}
	// SchemaToGrammar writes into a buffer of this size and silently cuts a
	// longer grammar; a cut grammar may still parse, as a different one.
	if buf := max(32768, min(1<<20, len(schema)*4)); len(g) >= buf-1 || len(g) > infer.MaxSchemaBytes {
		return "", infer.BadRequestf("json schema gives a grammar of %d bytes or more, limit %d: simplify the schema", len(g), infer.MaxSchemaBytes)
	}
	name := valueRule
	for i := 2; definesRule(string(g), name); i++ {
		name = valueRule + "-" + strconv.Itoa(i)
	}
	body, repeats, err := renameRoot(string(g), name)
	if err != nil {
		return "", infer.BadRequestf("json schema gives an unusable grammar: %v", err)
	}
	if repeats > maxGrammarRepeats {
		return "", infer.BadRequestf("json schema asks for %d repetitions in all (maxLength, minItems, ...), limit %d", repeats, maxGrammarRepeats)
	}
	if !definesRule(body, name) {
		return "", infer.BadRequestf("json schema gives a grammar without a root rule")
	}
	root := "root ::="
	if c.Prefix != "" {
		root += " " + gbnfLiteral(c.Prefix)
	}
	root += " " + name
	if c.Suffix != "" {
		root += " " + gbnfLiteral(c.Suffix)
	}
	grammar := root + "\n" + body
	// Parse it once with llama.cpp's own parser: nil means it is invalid.
	gr := llama.NewGrammar(grammar, nil, nil, nil)
	if gr == nil {
		return "", infer.BadRequestf("json schema gives a grammar llama.cpp cannot parse")
	}
	gr.Free()
	return grammar, nil
}

// definesRule reports whether grammar has a line defining rule name.
func definesRule(grammar, name string) bool {
	for line := range strings.Lines(grammar) {
		if rest, ok := strings.CutPrefix(line, name); ok && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "::=") {
			return true
		}
	}
	return false
}

// renameRoot renames every use and the definition of the rule "root" in a
// GBNF grammar to name, and sums the grammar's repetition counts (the
// larger bound of each {m,n}). It scans GBNF's lexical structure: string
// literals and character classes (with their backslash escapes) and
// comments are copied untouched; a word is a run of letters, digits and
// dashes.
func renameRoot(g, name string) (string, int, error) {
	var b strings.Builder
	b.Grow(len(g) + 16)
	repeats := 0
	for i := 0; i < len(g); {
		c := g[i]
		switch {
		case c == '"' || c == '[':
			end, err := skipQuoted(g, i)
			if err != nil {
				return "", 0, err
			}
			b.WriteString(g[i:end])
			i = end
		case c == '#':
			end := strings.IndexAny(g[i:], "\r\n")
			if end < 0 {
				end = len(g) - i
			}
			b.WriteString(g[i : i+end])
			i += end
		case c == '{':
			end := strings.IndexByte(g[i:], '}')
			if end < 0 {
				return "", 0, fmt.Errorf("unclosed repetition at byte %d", i)
			}
			n, err := repetitionBound(g[i+1 : i+end])
			if err != nil {
				return "", 0, fmt.Errorf("repetition at byte %d: %v", i, err)
			}
			repeats += n
			b.WriteString(g[i : i+end+1])
			i += end + 1
		case isWordChar(c):
			j := i
			for j < len(g) && isWordChar(g[j]) {
				j++
			}
			if w := g[i:j]; w == "root" {
				b.WriteString(name)
			} else {
				b.WriteString(w)
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), repeats, nil
}

// skipQuoted returns the index just past the string literal or character
// class that starts at g[i].
func skipQuoted(g string, i int) (int, error) {
	closer := byte('"')
	if g[i] == '[' {
		closer = ']'
	}
	for j := i + 1; j < len(g); j++ {
		switch g[j] {
		case '\\':
			j++ // the escaped byte; longer escapes (\x41, \u00e9) are plain bytes after it
		case closer:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %q at byte %d", g[i], i)
}

// repetitionBound parses the inside of {m}, {m,} or {m,n} and returns the
// larger count given.
func repetitionBound(s string) (int, error) {
	lo, hi, comma := strings.Cut(s, ",")
	m, err := strconv.Atoi(strings.TrimSpace(lo))
	if err != nil || m < 0 {
		return 0, fmt.Errorf("bad count %q", lo)
	}
	if !comma || strings.TrimSpace(hi) == "" {
		return m, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(hi))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad count %q", hi)
	}
	return max(m, n), nil
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// gbnfLiteral quotes s as a GBNF string literal matching exactly s's
// characters: quotes, backslashes and brackets are escaped, control
// characters written as \xHH, everything else (valid UTF-8, no NUL:
// infer.Validate checked) copied as is.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '[' || r == ']':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
