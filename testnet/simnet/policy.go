package simnet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Policy decides where a request runs. The built-in ones come from
// NewPolicy; the interface is sealed because a policy reads the cluster's
// internals (gossiped views or, for centralised ones, exact state).
//
// A Policy keeps per-run state (counters, approximate trees): Run resets
// it, so one value can serve several runs, one at a time.
type Policy interface {
	// Name is the policy's name as NewPolicy takes it.
	Name() string
	// Centralised reports whether the policy decides from every peer's
	// exact state without delay (a central router that sees everything),
	// rather than from what the entry peer knows.
	Centralised() bool
	kind() kind
	reset(c *Cluster)
	// route returns the peers to try, in order; empty, or the entry peer
	// first, means serve locally.
	route(c *Cluster, entry int, prompt []int32, reply int) []int
}

type kind uint8

const (
	localOnly kind = iota
	gossiping      // peers gossip digests and loads; forwarded work may be refused as busy
	central        // a central router with an exact, zero-lag view
)

// PolicyNames lists the built-in policies in the order reports show them.
func PolicyNames() []string {
	return []string{"local", "random", "round-robin", "least-loaded", "consistent-hash", "sglang", "paper", "meshllm", "oracle"}
}

// NewPolicy returns the built-in policy of that name:
//
//   - local: every request runs where it entered (no routing).
//   - random: a uniformly random live peer.
//   - round-robin: live peers in turn.
//   - least-loaded: the live peer with the fewest queued plus running
//     requests (ties: the entry peer, then the lowest index).
//   - consistent-hash: a hash ring (64 virtual nodes a peer) over the
//     prompt's first 256 tokens (whole blocks), with bounded load: a peer
//     holding more than 1.25 x the mean of outstanding requests is skipped.
//   - sglang: SGLang's cache-aware router: when loads are imbalanced
//     (max - min > 64 and max > 1.5 x min) the least loaded peer; else the
//     peer whose approximate tree (of what the router sent it, LRU-bounded
//     by its KV capacity) matches the most, if it matches more than 30% of
//     the prompt; else the peer with the smallest tree.
//   - paper: the seed paper's rule: the peer with the longest estimated
//     prefix from gossiped digests, if longer than the local match,
//     skipping peers that advertise push-back or are cooling down after a
//     busy answer; no RTT, load or speed awareness.
//   - meshllm: node.Decide on the entry peer's node.Mesh view.
//   - oracle: node.Decide's cost model on exact, zero-lag inputs (every
//     peer's true cached prefix, queue and speed, the true link delays)
//     with no margins; an upper reference, not a deployable policy.
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "local":
		return &localPolicy{}, nil
	case "random":
		return &randomPolicy{}, nil
	case "round-robin":
		return &roundRobin{}, nil
	case "least-loaded":
		return leastLoaded{}, nil
	case "consistent-hash":
		return &consistentHash{}, nil
	case "sglang":
		return &sglang{}, nil
	case "paper":
		return paperPolicy{}, nil
	case "meshllm":
		return meshllmPolicy{}, nil
	case "oracle":
		return oracle{}, nil
	}
	return nil, fmt.Errorf("simnet: unknown policy %q (have %s)", name, strings.Join(PolicyNames(), ", "))
}

// ParsePolicies parses a comma-separated list of policy names ("all" for
// every one).
func ParsePolicies(list string) ([]Policy, error) {
	names := strings.Split(list, ",")
	if strings.TrimSpace(list) == "all" {
		names = PolicyNames()
	}
	var out []Policy
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		p, err := NewPolicy(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("simnet: no policies in %q", list)
	}
	return out, nil
}

type localPolicy struct{}

func (*localPolicy) Name() string                            { return "local" }
func (*localPolicy) Centralised() bool                       { return false }
func (*localPolicy) kind() kind                              { return localOnly }
func (*localPolicy) reset(*Cluster)                          {}
func (*localPolicy) route(*Cluster, int, []int32, int) []int { return nil }

type randomPolicy struct{ r *rand.Rand }

func (*randomPolicy) Name() string      { return "random" }
func (*randomPolicy) Centralised() bool { return true }
func (*randomPolicy) kind() kind        { return central }
func (p *randomPolicy) reset(c *Cluster) {
	p.r = rand.New(rand.NewPCG(c.cfg.Seed, 0x72616e646f6d))
}
func (p *randomPolicy) route(c *Cluster, entry int, _ []int32, _ int) []int {
	return []int{c.live(p.r.IntN(len(c.peers)))}
}

type roundRobin struct{ next int }

func (*roundRobin) Name() string      { return "round-robin" }
func (*roundRobin) Centralised() bool { return true }
func (*roundRobin) kind() kind        { return central }
func (p *roundRobin) reset(*Cluster)  { p.next = 0 }
func (p *roundRobin) route(c *Cluster, _ int, _ []int32, _ int) []int {
	t := c.live(p.next % len(c.peers))
	p.next = t + 1
	return []int{t}
}

type leastLoaded struct{}

func (leastLoaded) Name() string      { return "least-loaded" }
func (leastLoaded) Centralised() bool { return true }
func (leastLoaded) kind() kind        { return central }
func (leastLoaded) reset(*Cluster)    {}
func (leastLoaded) route(c *Cluster, entry int, _ []int32, _ int) []int {
	load := func(i int) int { st := c.peers[i].eng.Stats(); return st.Queued + st.Active }
	best, bl := entry, load(entry)
	if !c.peers[entry].up {
		best, bl = -1, 0
	}
	for i, p := range c.peers {
		if !p.up || i == entry {
			continue
		}
		if l := load(i); best < 0 || l < bl {
			best, bl = i, l
		}
	}
	if best < 0 {
		return nil
	}
	return []int{best}
}

// sortedBy returns idx sorted by key descending, ties by index.
func sortedBy(idx []int, key func(int) int) []int {
	slices.SortStableFunc(idx, func(a, b int) int {
		if ka, kb := key(a), key(b); ka != kb {
			return kb - ka
		}
		return a - b
	})
	return idx
}
