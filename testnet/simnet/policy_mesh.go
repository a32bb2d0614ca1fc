package simnet

import (
	"slices"
	"time"

	"github.com/meshllm/meshllm/node"
)

// localView is the entry peer's exact state, as node.Router.LocalView
// builds it.
func (c *Cluster) localView(p *peer, prompt []int32) node.LocalView {
	st := p.eng.Stats()
	pf, dc := p.speeds.Get()
	return node.LocalView{
		Cached: p.eng.cachedPrefix(prompt), QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots,
		PrefillTokPerSec: pf, DecodeTokPerSec: dc,
	}
}

func (c *Cluster) indices(d node.Decision) []int {
	if d.Local {
		return nil
	}
	out := []int{c.index[d.Peer]}
	for _, f := range d.Fallbacks {
		out = append(out, c.index[f])
	}
	return out
}

// meshllmPolicy is node.Decide on the entry peer's gossiped view.
type meshllmPolicy struct{}

func (meshllmPolicy) Name() string      { return "meshllm" }
func (meshllmPolicy) Centralised() bool { return false }
func (meshllmPolicy) kind() kind        { return gossiping }
func (meshllmPolicy) reset(*Cluster)    {}
func (meshllmPolicy) route(c *Cluster, entry int, prompt []int32, reply int) []int {
	p := c.peers[entry]
	now := wall(c.l.now)
	v := p.mesh.View(prompt, c.localView(p, prompt), now)
	return c.indices(node.Decide(node.Route{PromptTokens: len(prompt), MaxTokens: reply}, v, c.cfg.Node))
}

// paperPolicy is the seed paper's longest-estimated-prefix rule.
type paperPolicy struct{}

func (paperPolicy) Name() string      { return "paper" }
func (paperPolicy) Centralised() bool { return false }
func (paperPolicy) kind() kind        { return gossiping }
func (paperPolicy) reset(*Cluster)    {}
func (paperPolicy) route(c *Cluster, entry int, prompt []int32, _ int) []int {
	p := c.peers[entry]
	now := wall(c.l.now)
	local := p.eng.cachedPrefix(prompt)
	v := p.mesh.View(prompt, node.LocalView{Cached: local}, now)
	var cands []node.PeerView
	for _, pv := range v.Peers {
		if pv.PushBack || now.Before(pv.CooldownUntil) || pv.EstimatedCached <= local {
			continue
		}
		cands = append(cands, pv)
	}
	slices.SortStableFunc(cands, func(a, b node.PeerView) int { return b.EstimatedCached - a.EstimatedCached })
	var out []int
	for _, pv := range cands {
		if len(out) > c.cfg.Node.MaxFallbacks {
			break
		}
		out = append(out, c.index[pv.ID])
	}
	return out
}

// oracle is Decide's cost model on the exact state of every peer.
type oracle struct{}

func (oracle) Name() string      { return "oracle" }
func (oracle) Centralised() bool { return true }
func (oracle) kind() kind        { return central }
func (oracle) reset(*Cluster)    {}
func (oracle) route(c *Cluster, entry int, prompt []int32, reply int) []int {
	pol := c.cfg.Node
	pol.MinSaving, pol.MinSavingFraction, pol.StreamRoundTrips = 0, 0, 1
	pol.Bandwidth = c.cfg.Net.bandwidth()
	speeds := func(p *peer) (float64, float64) {
		return 1 / max(p.prof.PrefillToken, 1e-12), 1 / max(p.prof.DecodeToken, 1e-12)
	}
	e := c.peers[entry]
	st := e.eng.Stats()
	pf, dc := speeds(e)
	v := node.View{Now: wall(c.l.now), Local: node.LocalView{
		Cached: e.eng.cachedPrefix(prompt), QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots,
		PrefillTokPerSec: pf, DecodeTokPerSec: dc,
	}}
	for i, p := range c.peers {
		if i == entry || !p.up {
			continue
		}
		st := p.eng.Stats()
		pf, dc := speeds(p)
		// Decide charges StreamRoundTrips x RTT; the harness pays one way
		// out and one way back.
		rtt := c.cfg.Net.OneWay(entry, i) + c.cfg.Net.OneWay(i, entry)
		v.Peers = append(v.Peers, node.PeerView{
			ID: p.id, EstimatedCached: p.eng.cachedPrefix(prompt), RTT: rtt, RTTKnown: true,
			QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots,
			PrefillTokPerSec: pf, DecodeTokPerSec: dc, LoadAge: time.Duration(0),
		})
	}
	return c.indices(node.Decide(node.Route{PromptTokens: len(prompt), MaxTokens: reply}, v, pol))
}
