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

// oracle knows every peer's exact state and the true link delays, and
// sends each request where it will complete first if nothing else arrives:
// the link out, the peer's exact backlog of work, the request's own
// prefill (with that peer's exact cached prefix) and decode, and the link
// back. Ties go to the entry peer, then to the smaller backlog.
type oracle struct{}

func (oracle) Name() string      { return "oracle" }
func (oracle) Centralised() bool { return true }
func (oracle) kind() kind        { return central }
func (oracle) reset(*Cluster)    {}
func (oracle) route(c *Cluster, entry int, prompt []int32, reply int) []int {
	best, bestCost, bestBacklog := -1, time.Duration(0), time.Duration(0)
	for i, p := range c.peers {
		if !p.up && i != entry {
			continue
		}
		cached := min(p.eng.cachedPrefix(prompt), len(prompt)-1)
		backlog := p.eng.backlog()
		cost := backlog + p.eng.service(len(prompt), max(cached, 0), reply)
		if i != entry {
			cost += c.cfg.Net.Delay(entry, i, 4*len(prompt)+requestOverhead) + c.cfg.Net.Delay(i, entry, pieceBytes)
		}
		better := best < 0 || cost < bestCost || (cost == bestCost && best != entry && backlog < bestBacklog)
		if i == entry && cost <= bestCost {
			better = true
		}
		if better {
			best, bestCost, bestBacklog = i, cost, backlog
		}
	}
	if best == entry {
		return nil
	}
	return []int{best}
}
