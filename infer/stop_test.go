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

func FuzzStopMatcher(f *testing.F) {
	f.Add("hello world", "wor", 3)
	f.Add("\xff\xfe abc", "c", 1)
	f.Fuzz(func(t *testing.T, text, stop string, cut int) {
		m := NewStopMatcher([]string{stop})
		if cut < 0 {
			cut = -cut
		}
		var b strings.Builder
		stopped := false
		for i := 0; i < len(text) && !stopped; {
			n := 1 + cut%7
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
		if stop != "" && strings.Contains(got, stop) && stopped {
			t.Fatalf("output %q contains stop %q", got, stop)
		}
		if !stopped && got != strings.ToValidUTF8(text, "\uFFFD") && validEverywhere(text) {
			t.Fatalf("lost text: got %q from %q", got, text)
		}
	})
}

func validEverywhere(s string) bool { return strings.ToValidUTF8(s, "") == s }
