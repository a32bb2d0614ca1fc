package infer

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		pieces  []string
		want    string
		stopped bool
	}{
		{"no stops", nil, []string{"Once", " upon", " a time"}, "Once upon a time", false},
		{"stop inside piece", []string{"END"}, []string{"abcENDdef"}, "abc", true},
		{"stop across pieces", []string{"\n\n"}, []string{"one\n", "\ntwo"}, "one", true},
		{"partial then diverges", []string{"STOP"}, []string{"ST", "OCK"}, "STOCK", false},
		{"split utf8", nil, []string{"caf\xc3", "\xa9!"}, "café!", false},
		{"dangling utf8 flushed", nil, []string{"ok\xe2\x82"}, "ok\uFFFD", false},
		{"first of several stops", []string{"zz", "b"}, []string{"aab", "zz"}, "aa", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewStopMatcher(tc.stops)
			var b strings.Builder
			stopped := false
			for _, p := range tc.pieces {
				out, s := m.Push(p)
				b.WriteString(out)
				if s {
					stopped = true
					break
				}
			}
			if !stopped {
				b.WriteString(m.Flush())
			}
			if b.String() != tc.want || stopped != tc.stopped {
				t.Fatalf("got %q stopped=%v, want %q stopped=%v", b.String(), stopped, tc.want, tc.stopped)
			}
		})
	}
}

func TestStopMatcherHoldsBackPartialUTF8(t *testing.T) {
	m := NewStopMatcher(nil)
	if out, _ := m.Push("a\xe2\x82"); out != "a" {
		t.Fatalf("incomplete rune emitted: %q", out)
	}
	if out, _ := m.Push("\xac"); out != "€" {
		t.Fatalf("completed rune: got %q", out)
	}
}

// FuzzStopMatcher feeds text to a matcher in pieces of 1..7 bytes (from
// cut) and checks what a client sees: the text ends at the first stop
// string it contains, and nothing is lost or changed before it. Each input
// runs twice: with the fuzzed stop string, which random text rarely
// contains, and with one taken from the text itself (its bytes at
// cut%len, 1..8 long, made valid UTF-8), which it usually does, so that
// the stopping path is exercised on every input.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello world", "wor", 3)
	f.Add("\xff\xfe abc", "c", 1)
	f.Add("one\n\ntwo\n\n", "\n\n", 0)
	f.Add("caf\xc3\xa9 caf\xc3\xa9", "\xc3\xa9 c", 2)
	f.Add("aaab", "aab", 6)
	f.Add("no stop here", "zzz", 5)
	f.Fuzz(func(t *testing.T, text, stop string, cut int) {
		if cut < 0 {
			cut = -(cut + 1) // no overflow at math.MinInt
		}
		// Stop strings arrive through JSON, which only carries valid
		// UTF-8: an invalid one is made valid rather than skipped.
		stops := []string{strings.ToValidUTF8(stop, "")}
		if len(text) > 0 {
			at := cut % len(text)
			stops = append(stops, strings.ToValidUTF8(text[at:min(len(text), at+1+cut/7%8)], ""))
		}
		for _, stop := range stops {
			checkStopMatcher(t, text, stop, 1+cut%7)
		}
	})
}

// checkStopMatcher pushes text to a matcher for stop in pieces of n bytes.
func checkStopMatcher(t *testing.T, text, stop string, n int) {
	t.Helper()
	var stops []string
	if stop != "" {
		stops = []string{stop}
	}
	m := NewStopMatcher(stops)
	var b strings.Builder
	stopped := false
	for i := 0; i < len(text) && !stopped; {
		j := min(len(text), i+n)
		out, s := m.Push(text[i:j])
		b.WriteString(out)
		stopped = s
		i = j
	}
	if !stopped {
		b.WriteString(m.Flush())
	}
	got := b.String()
	// Generated text is matched as the model's bytes: the first stop
	// string in them ends it.
	at := -1
	if stop != "" {
		at = strings.Index(text, stop)
	}
	if stopped != (at >= 0) {
		t.Fatalf("text %q, stop %q at %d, pieces of %d: stopped=%v", text, stop, at, n, stopped)
	}
	if !validEverywhere(text) {
		// Invalid bytes reach the client as U+FFFD, one per run, and the
		// runs depend on the piece boundaries: only the stop is checked.
		return
	}
	want := text
	if at >= 0 {
		want = text[:at]
	}
	if got != want {
		t.Fatalf("text %q, stop %q, pieces of %d: client saw %q, want %q", text, stop, n, got, want)
	}
}

func validEverywhere(s string) bool { return strings.ToValidUTF8(s, "") == s }
