package compose

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/mmlu"
)

// DemoResult is what one run of the demo saw.
type DemoResult struct {
	// MeshFormed is how long after the start peer1 knew every other peer
	// (load and RTT heard); Peers how many it knew then.
	MeshFormed time.Duration
	Peers      int
	// IDs maps boot, peer1 and peer2 to their PeerIDs.
	IDs map[string]string
	// Warm is the usage of the first request, sent through peer2, and
	// WarmDecision peer2's record of it. Holder is the PeerID of the peer
	// that served it, and so holds the prefix: peer2 itself, or the peer
	// peer2's router preferred for a cold prompt (a faster or idler one).
	Warm         Usage
	WarmDecision node.DecisionRecord
	Holder       string
	// Entry is the published peer the same-prefix request went through
	// (peer1, or peer2 when peer1 holds the prefix); Routed is its usage
	// and Decision the entry's record of it.
	Entry    string
	Routed   Usage
	Decision node.DecisionRecord
	// ServedByPeer is the entry's meshllm_router_served_total{where="peer"}.
	ServedByPeer float64
}

// Forwarded reports whether the entry peer forwarded the same-prefix
// request to the peer holding the prefix, which served it from its cache.
func (r *DemoResult) Forwarded() bool {
	return r.Decision.Reason == node.ReasonForward && string(r.Decision.ServedBy) == r.Holder &&
		r.Routed.PromptTokenDetails.CachedTokens > r.Routed.PromptTokens/3 && r.ServedByPeer >= 1
}

// Demo runs the demo on a mesh that Up started at started: it waits until
// peer1 knows all four other peers, warms a 5-shot MMLU prefix through
// peer2, sends a request with the same prefix through a published peer
// that does not hold it, and reads that peer's routing decision and
// metrics. Progress goes to log.
func (m *Mesh) Demo(ctx context.Context, log io.Writer, started time.Time) (*DemoResult, error) {
	set, err := mmlu.Load(filepath.Join(m.cfg.Dir, mmlu.DefaultDir))
	if err != nil {
		return nil, err
	}
	subject := set.Subject("high_school_geography")
	if subject == nil {
		return nil, fmt.Errorf("compose: MMLU has no high_school_geography")
	}
	res := &DemoResult{IDs: map[string]string{"boot": m.BootPeer}}
	for _, svc := range []string{"peer1", "peer2"} {
		if res.IDs[svc], err = m.PeerID(ctx, svc); err != nil {
			return nil, err
		}
	}
	want := len(Services) - 1
	fmt.Fprintf(log, "waiting for the mesh: peer1 and peer2 must hear load, RTT and a cache digest from %d peers each\n", want)
	err = poll(ctx, 3*time.Minute, func() (bool, error) {
		for _, svc := range []string{"peer1", "peer2"} {
			blocks, err := m.digests(ctx, svc)
			if err != nil || len(blocks) < want {
				res.Peers = len(blocks)
				return false, nil // still starting
			}
		}
		res.Peers = want
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("mesh did not form (a published peer knows %d of %d peers): %w", res.Peers, want, err)
	}
	res.MeshFormed = time.Since(started)
	fmt.Fprintf(log, "mesh formed in %s: peer1 and peer2 know all %d other peers\n", res.MeshFormed.Round(100*time.Millisecond), res.Peers)

	// What peer1 and peer2 know of the others' caches before the warm.
	before := map[string]int{}
	for _, svc := range []string{"peer1", "peer2"} {
		blocks, err := m.digests(ctx, svc)
		if err != nil {
			return nil, err
		}
		for id, n := range blocks {
			before[id] = max(before[id], n)
		}
	}
	if res.Warm, err = m.Complete(ctx, "peer2", subject.FiveShot(0), 4); err != nil {
		return nil, err
	}
	if res.WarmDecision, err = m.lastDecision(ctx, "peer2"); err != nil {
		return nil, err
	}
	res.Holder, res.Entry = res.IDs["peer2"], "peer1"
	if by := string(res.WarmDecision.ServedBy); by != "" {
		res.Holder = by
	}
	if res.Holder == res.IDs["peer1"] {
		res.Entry = "peer2"
	}
	fmt.Fprintf(log, "warmed a %d-token 5-shot prefix through peer2: %s, so %s holds it\n",
		res.Warm.PromptTokens, res.WarmDecision.Reason, res.name(res.Holder))
	// The holder's digest already held the few blocks of the self-test
	// each peer runs at start; wait until the entry sees it grow.
	err = poll(ctx, time.Minute, func() (bool, error) {
		blocks, err := m.digests(ctx, res.Entry)
		if err != nil {
			return false, err
		}
		return blocks[res.Holder] > before[res.Holder], nil
	})
	if err != nil {
		return nil, fmt.Errorf("the holder's new digest did not reach %s: %w", res.Entry, err)
	}
	fmt.Fprintf(log, "the holder's cache digest reached %s\n", res.Entry)

	if res.Routed, err = m.Complete(ctx, res.Entry, subject.FiveShot(1), 4); err != nil {
		return nil, err
	}
	if res.Decision, err = m.lastDecision(ctx, res.Entry); err != nil {
		return nil, err
	}
	exp, err := m.Metrics(ctx, res.Entry)
	if err != nil {
		return nil, err
	}
	res.ServedByPeer = Metric(exp, `meshllm_router_served_total{where="peer"}`)
	d := res.Decision
	fmt.Fprintf(log, "same-prefix request through %s (%d prompt tokens, %d cached): %s",
		res.Entry, res.Routed.PromptTokens, res.Routed.PromptTokenDetails.CachedTokens, d.Reason)
	if d.ServedBy != "" {
		fmt.Fprintf(log, " -> served by %s", res.name(string(d.ServedBy)))
	}
	fmt.Fprintf(log, "\n  expected cost: local %.1f ms, best peer %.1f ms; cached tokens estimated %d, realized %d; took %.1f ms\n",
		d.LocalCostMillis, d.PeerCostMillis, d.EstimatedCached, d.RealizedCached, d.DurationMillis)
	fmt.Fprintf(log, "  %s: meshllm_router_served_total{where=\"peer\"} %g\n", res.Entry, res.ServedByPeer)
	return res, nil
}

// digests returns, for each peer svc knows with load, RTT and a cache
// digest, how many blocks that digest holds.
func (m *Mesh) digests(ctx context.Context, svc string) (map[string]int, error) {
	st, err := m.Status(ctx, svc)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range st.Peers {
		if p.Load != nil && p.RTTMillis != nil && p.DigestBlocks > 0 {
			out[string(p.Peer)] = p.DigestBlocks
		}
	}
	return out, nil
}

// lastDecision returns svc's latest routing decision from /v1/mesh.
func (m *Mesh) lastDecision(ctx context.Context, svc string) (node.DecisionRecord, error) {
	st, err := m.Status(ctx, svc)
	if err != nil {
		return node.DecisionRecord{}, err
	}
	if len(st.Recent) == 0 {
		return node.DecisionRecord{}, fmt.Errorf("compose: %s reports no routing decision", svc)
	}
	return st.Recent[len(st.Recent)-1], nil
}

// name labels a PeerID with its service when it is boot, peer1 or peer2.
func (r *DemoResult) name(id string) string {
	for svc, pid := range r.IDs {
		if pid == id {
			return svc + " (" + short(id) + ")"
		}
	}
	return "peer " + short(id)
}

// poll calls cond every 250 ms until it holds, fails, or d passes. The
// containers' convergence (DHT, gossip mesh) has no event to wait on from
// outside; d is generous and only a hang reaches it.
func poll(ctx context.Context, d time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// short abbreviates a PeerID for printing.
func short(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-8:]
	}
	return id
}
