// Package forward declares where a peer's own requests may be served: the
// policy the user sets for the peer (meshllm join --forward) and that one
// request may narrow (the HTTP header X-Meshllm-Forward or the body field
// "meshllm": {"forward": ...}).
//
// The HTTP API (node/httpapi) parses a request's policy and puts it on the
// request's context with WithPolicy; the router (node.Router) reads it with
// FromContext, narrows its own setting with it (Narrow) and leaves out of
// the decision every peer the result excludes. The package is a leaf (it
// imports only the standard library) so that both may import it without
// importing each other; it has no state.
package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Policy says which peers may serve this peer's own requests. Its zero
// value, Unset, means "no preference": a request without a policy gets
// the peer's, and a peer without one forwards to any peer.
//
// Policies are ordered from narrowest to widest: None < Members < Any.
// Narrow keeps the narrower of two, so a request can only narrow what the
// peer allows, never widen it.
type Policy uint8

const (
	// Unset is no preference (a request that says nothing).
	Unset Policy = iota
	// None keeps every request on the local engine: no prompt leaves the
	// machine.
	None
	// Members lets a request be served only by peers proven members of the
	// private mesh (p2p.Membership.IsMember: the mesh-key handshake done on
	// the current connection, and on the allowlist when there is one). In
	// an open mesh, with no membership, no peer is a member, and Members
	// serves every request locally.
	Members
	// Any lets a request be served by any peer whose cache and speed win,
	// strangers included in an open mesh.
	Any
)

// ErrBadPolicy is wrapped by Parse's errors.
var ErrBadPolicy = errors.New("forward policy must be any, members or none")

// Parse reads a policy's name: "any", "members" or "none", without regard
// to case or surrounding space. Anything else, the empty string included,
// is an error wrapping ErrBadPolicy that quotes the value.
func Parse(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "any":
		return Any, nil
	case "members":
		return Members, nil
	case "none":
		return None, nil
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return Unset, fmt.Errorf("%w, got %q", ErrBadPolicy, s)
}

// String returns the policy's name ("any", "members", "none"; "" for
// Unset).
func (p Policy) String() string {
	switch p {
	case Unset:
		return ""
	case None:
		return "none"
	case Members:
		return "members"
	case Any:
		return "any"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// MarshalText implements encoding.TextMarshaler with String.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with Parse; the empty
// text is Unset.
func (p *Policy) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*p = Unset
		return nil
	}
	q, err := Parse(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Meaning says in words what the policy lets happen to this peer's own
// requests, for the line `meshllm join` prints.
func (p Policy) Meaning() string {
	switch p {
	case None:
		return "this peer's requests are served here only; no prompt leaves this machine"
	case Members:
		return "this peer's requests may be served by proven members of the private mesh only"
	case Any, Unset:
		return "this peer's requests may be served by any peer of the mesh"
	}
	return "unknown policy"
}

// Narrow returns the narrower of a and b; Unset gives way to the other.
// A peer setting narrowed by a request's policy is what that request may
// use: Narrow(Members, Any) is Members, Narrow(Any, None) is None.
func Narrow(a, b Policy) Policy {
	switch {
	case a == Unset:
		return b
	case b == Unset:
		return a
	}
	return min(a, b)
}

// Resolve is the policy of one request: the peer's setting narrowed by the
// request's, Any when neither says anything.
func Resolve(peer, request Policy) Policy {
	if p := Narrow(peer, request); p != Unset {
		return p
	}
	return Any
}

// ctxKey is the context key of a request's policy.
type ctxKey struct{}

// WithPolicy returns a context carrying p as the request's policy. A
// policy already on ctx is narrowed by p (Narrow), so layers that each
// restrict a request can only restrict it further. Unset returns ctx.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	if p == Unset {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, Narrow(FromContext(ctx), p))
}

// FromContext returns the request's policy set by WithPolicy, or Unset.
func FromContext(ctx context.Context) Policy {
	p, _ := ctx.Value(ctxKey{}).(Policy)
	return p
}
