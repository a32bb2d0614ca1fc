package forward

import (
	"context"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Policy{"any": Any, "members": Members, "none": None, " None ": None, "MEMBERS": Members} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "all", "member", "local", "any,none"} {
		if _, err := Parse(in); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("Parse(%q) err = %v, want ErrBadPolicy", in, err)
		}
	}
}

// TestNarrowOnlyNarrows: a request cannot widen the peer's setting.
func TestNarrowOnlyNarrows(t *testing.T) {
	cases := []struct{ peer, req, want Policy }{
		{Members, Any, Members},
		{Members, None, None},
		{None, Any, None},
		{Any, Members, Members},
		{Any, Unset, Any},
		{Unset, Members, Members},
		{Unset, Unset, Any},
	}
	for _, c := range cases {
		if got := Resolve(c.peer, c.req); got != c.want {
			t.Errorf("Resolve(%v, %v) = %v, want %v", c.peer, c.req, got, c.want)
		}
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if p := FromContext(ctx); p != Unset {
		t.Fatalf("empty context: %v", p)
	}
	ctx = WithPolicy(ctx, Members)
	if p := FromContext(WithPolicy(ctx, Any)); p != Members {
		t.Fatalf("Any over Members widened it: %v", p)
	}
	if p := FromContext(WithPolicy(ctx, None)); p != None {
		t.Fatalf("None over Members: %v", p)
	}
	if p := FromContext(WithPolicy(ctx, Unset)); p != Members {
		t.Fatalf("Unset over Members: %v", p)
	}
}

func TestText(t *testing.T) {
	for _, p := range []Policy{Unset, None, Members, Any} {
		b, _ := p.MarshalText()
		var q Policy
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("%v round-trips to %v, %v", p, q, err)
		}
	}
	var q Policy
	if err := q.UnmarshalText([]byte("all")); !errors.Is(err, ErrBadPolicy) {
		t.Errorf("all: %v", err)
	}
}
