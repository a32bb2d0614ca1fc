package infer

import (
	"fmt"
	"strings"
)

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
