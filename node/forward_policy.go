package node

import (
	"context"

	"github.com/meshllm/meshllm/node/forward"
)

// ReasonForwardPolicy: the request was served locally because its forward
// policy (the peer's RouterConfig.Forward narrowed by the request's)
// excluded every peer the mesh knew for it.
const ReasonForwardPolicy Reason = "forward-policy"

// forwardPolicy is the policy one request is decided under: the peer's
// setting narrowed by the one its context carries (forward.WithPolicy, set
// by node/httpapi from the X-Meshllm-Forward header or the "meshllm" body
// field). A request can narrow the peer's setting, never widen it.
func (r *Router) forwardPolicy(ctx context.Context) forward.Policy {
	return forward.Resolve(r.fwdPolicy, forward.FromContext(ctx))
}

// allowed reports whether policy p lets peer serve this peer's request:
// Any admits every peer, Members the proven members of the private mesh
// (none without a membership), None no one.
func (r *Router) allowed(p forward.Policy, peer PeerID) bool {
	switch p {
	case forward.Any:
		return true
	case forward.Members:
		return r.isMember != nil && r.isMember(peer)
	}
	return false
}

// applyForwardPolicy removes from v the peers p excludes, before Decide
// sees them (so neither the choice nor a fallback can name one), and
// returns how many it removed. It reorders nothing.
func (r *Router) applyForwardPolicy(p forward.Policy, v *View) (excluded int) {
	kept := v.Peers[:0]
	for _, pv := range v.Peers {
		if r.allowed(p, pv.ID) {
			kept = append(kept, pv)
		}
	}
	excluded = len(v.Peers) - len(kept)
	clear(v.Peers[len(kept):])
	v.Peers = kept
	return excluded
}
