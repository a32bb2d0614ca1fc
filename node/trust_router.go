package node

import (
	"time"

	"github.com/meshllm/meshllm/infer"
)

// This file holds the router's side of Trust: the view adjustment before
// Decide and the judgement of each forward's end.

// Trust returns the router's trust in its peers (nil when disabled), for
// /v1/mesh and the GossipSub application score.
func (r *Router) Trust() *Trust { return r.trust }

// trustView scales v's peer claims by their trust (see Trust.Apply).
func (r *Router) trustView(v View) View {
	if r.trust == nil {
		return v
	}
	return r.trust.Apply(v)
}

// judge feeds the end of one forward to c.Peer, begun at began, to the
// trust: a served result is judged on its cache and time claims, a timeout
// counts as a failed time claim, and every other end but busy (the
// peer's load, the push-back cooldown's business) and the client's
// leaving as a failure (Claim.Failed). The router calls it for a refusal
// (outcomeRejected) only once the local engine has accepted the request.
func (r *Router) judge(c Candidate, res *infer.Result, outcome string, began time.Time) {
	if r.trust == nil {
		return
	}
	now := r.now()
	cl := Claim{EstimatedCached: c.EstimatedCached, Expected: c.Cost, Took: now.Sub(began)}
	switch outcome {
	case outcomeServed:
		cl.RealizedCached = res.CachedTokens
	case outcomeTimeout:
		cl.TimedOut = true
	case outcomeBusy, outcomeClient:
		return
	default: // error, rejected, violation
		cl.Failed = true
	}
	r.trust.Observe(c.Peer, cl, now)
}

// annotateTrust fills the trust column of /v1/mesh's peers.
func (r *Router) annotateTrust(peers []PeerStatus, now time.Time) {
	if r.trust == nil {
		return
	}
	for i := range peers {
		v := r.trust.Get(peers[i].Peer, now)
		peers[i].Trust = &v
	}
}
