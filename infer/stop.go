package infer

import (
	"strings"
	"unicode/utf8"
)

// StopMatcher turns the pieces a model generates into text a client may see:
// it holds back text that could still become a stop string and bytes of an
// incomplete UTF-8 sequence (byte-level tokens split characters), and says
// when a stop string completed.
//
// A StopMatcher is used by one request at a time; it is not safe for
// concurrent use.
type StopMatcher struct {
	stops   []string
	pending string
}

// NewStopMatcher returns a matcher for the given stop strings (empty ones
// are ignored).
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	return m
}

// Push adds generated text and returns the text now safe to emit. stopped is
// true when a stop string completed: out then holds the text before it, and
// the caller ends generation.
func (m *StopMatcher) Push(piece string) (out string, stopped bool) {
	m.pending += piece
	for _, s := range m.stops {
		if i := strings.Index(m.pending, s); i >= 0 {
			out = validPrefix(m.pending[:i])
			m.pending = ""
			return out, true
		}
	}
	keep := 0
	for _, s := range m.stops {
		if k := overlap(m.pending, s); k > keep {
			keep = k
		}
	}
	cut := len(m.pending) - keep
	cut = completeUTF8(m.pending[:cut])
	out, m.pending = m.pending[:cut], m.pending[cut:]
	return out, false
}

// Flush returns what is still held back, at the end of generation. Bytes of
// an incomplete UTF-8 sequence become U+FFFD.
func (m *StopMatcher) Flush() string {
	out := strings.ToValidUTF8(m.pending, "\uFFFD")
	m.pending = ""
	return out
}

// overlap returns the length of the longest suffix of text that is a proper
// prefix of stop.
func overlap(text, stop string) int {
	n := min(len(text), len(stop)-1)
	for k := n; k > 0; k-- {
		if strings.HasSuffix(text, stop[:k]) {
			return k
		}
	}
	return 0
}

// completeUTF8 returns the length of the longest prefix of s that does not
// end inside an incomplete (but possibly still completing) UTF-8 sequence.
func completeUTF8(s string) int {
	for back := 1; back <= utf8.UTFMax && back <= len(s); back++ {
		c := s[len(s)-back]
		if c < utf8.RuneSelf {
			return len(s) // ASCII: everything before is settled
		}
		if utf8.RuneStart(c) {
			if r, size := utf8.DecodeRuneInString(s[len(s)-back:]); r == utf8.RuneError && size <= 1 && back < runeLen(c) {
				return len(s) - back // incomplete: hold it back
			}
			return len(s)
		}
	}
	return len(s)
}

// runeLen is the length a UTF-8 sequence starting with c claims.
func runeLen(c byte) int {
	switch {
	case c&0xE0 == 0xC0:
		return 2
	case c&0xF0 == 0xE0:
		return 3
	case c&0xF8 == 0xF0:
		return 4
	}
	return 1
}

// validPrefix replaces invalid UTF-8 in s.
func validPrefix(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
