package infer

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeEscape decodes the JSON escape sequence at the start of e (which
// starts with a backslash): the text, the bytes used, or more when e is an
// incomplete sequence.
func decodeEscape(e string) (out string, used int, more bool) {
	if len(e) < 2 {
		return "", 0, true
	}
	switch e[1] {
	case '"', '\\', '/':
		return e[1:2], 2, false
	case 'b':
		return "\b", 2, false
	case 'f':
		return "\f", 2, false
	case 'n':
		return "\n", 2, false
	case 'r':
		return "\r", 2, false
	case 't':
		return "\t", 2, false
	case 'u':
	default:
		return e[:2], 2, false
	}
	r, n, more := hex4(e[2:])
	if more {
		return "", 0, true
	}
	if n < 4 {
		return e[:2+n], 2 + n, false
	}
	if !utf16.IsSurrogate(r) {
		return string(r), 6, false
	}
	// A surrogate: a low one must follow as \uXXXX.
	tail := e[6:]
	if len(tail) < 2 && strings.HasPrefix(`\u`, tail) {
		return "", 0, true
	}
	if strings.HasPrefix(tail, `\u`) {
		r2, n2, more := hex4(tail[2:])
		if more {
			return "", 0, true
		}
		if n2 == 4 {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return string(dec), 12, false
			}
		}
	}
	return string(utf8.RuneError), 6, false
}

// hex4 reads up to 4 hex digits: the value and how many were read, or more
// when s ends before 4 digits or a non-digit.
func hex4(s string) (r rune, n int, more bool) {
	for n < 4 {
		if n == len(s) {
			return 0, n, true
		}
		c := s[n]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, n, false
		}
		r = r<<4 | rune(d)
		n++
	}
	return r, n, false
}
