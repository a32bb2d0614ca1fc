package simnet

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/workload"
)

// Config describes a simulated cluster.
type Config struct {
	// Peers is the number of peers.
	Peers int
	// Profile is every peer's engine cost model; Profiles, when set (one
	// per peer), overrides it peer by peer (heterogeneous peers).
	Profile  sim.Profile
	Profiles []sim.Profile
	// CacheTokens, when > 0, sets every peer's KV capacity in tokens
	// (Profile.CacheCells).
	CacheTokens int
	// Running is how many requests an engine runs at once; its other
	// slots only keep cached prefixes (0: all of Profile.Slots run, as in
	// infer/sim). Load announcements report Running as the engine's slots.
	Running int
	// Net is the network between the peers.
	Net Network
	// Node is the routing policy of the gossiping peers (meshllm's Decide
	// and the push-back threshold of `paper`); the zero value means
	// node.DefaultPolicy with the assumed speeds of Profile.
	Node node.Policy
	// Announce is the gossip interval (0: 1 s) and SnapshotEvery the full
	// snapshot period in intervals (0: 10), as node.AnnounceConfig.
	Announce      time.Duration
	SnapshotEvery int
	// BlockSize is the digests' block size (0: cache.DefaultBlockSize).
	BlockSize int
	// Window is the traffic-share window (0: a twentieth of the run).
	Window time.Duration
	// Churn makes peers leave and come back during the run.
	Churn []Churn
	// Seed drives the policies' and the gossip phases' randomness.
	Seed uint64
}

// Churn is one peer leaving (Up false) or coming back (Up true) At a
// virtual time. A leaving peer finishes what it is serving, takes no new
// work and goes silent; requests that would have entered at it enter at the
// next live peer (its users reconnect elsewhere). A returning peer starts
// with an empty cache and a new digest epoch.
type Churn struct {
	At   time.Duration
	Peer int
	Up   bool
}

// WithDefaults returns cfg with its zero fields filled in (Profiles one per
// peer, with CacheTokens applied and the profile defaults), or an error for
// an unusable cfg. Run applies it; other harnesses use it to run the same
// experiment with the same defaults.
func (cfg Config) WithDefaults() (Config, error) {
	if cfg.Peers < 1 {
		return cfg, fmt.Errorf("simnet: %d peers", cfg.Peers)
	}
	if cfg.Profiles != nil && len(cfg.Profiles) != cfg.Peers {
		return cfg, fmt.Errorf("simnet: %d profiles for %d peers", len(cfg.Profiles), cfg.Peers)
	}
	if err := cfg.Net.validate(cfg.Peers); err != nil {
		return cfg, err
	}
	if cfg.Profiles == nil {
		cfg.Profiles = make([]sim.Profile, cfg.Peers)
		for i := range cfg.Profiles {
			cfg.Profiles[i] = cfg.Profile
		}
	}
	for i := range cfg.Profiles {
		p := cfg.Profiles[i]
		if cfg.CacheTokens > 0 {
			p.CacheCells = cfg.CacheTokens
		}
		if err := p.Validate(); err != nil {
			return cfg, err
		}
		cfg.Profiles[i] = p.WithDefaults()
	}
	if cfg.Node == (node.Policy{}) {
		cfg.Node = DefaultNodePolicy(cfg.Profiles[0], cfg.Net)
	}
	if err := cfg.Node.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Announce <= 0 {
		cfg.Announce = time.Second
	}
	if cfg.SnapshotEvery <= 0 {
		cfg.SnapshotEvery = 10
	}
	for _, ch := range cfg.Churn {
		if ch.Peer < 0 || ch.Peer >= cfg.Peers || ch.At < 0 {
			return cfg, fmt.Errorf("simnet: bad churn event %+v", ch)
		}
	}
	return cfg, nil
}

// DefaultNodePolicy is node.DefaultPolicy with the assumed speeds of the
// profile (what `meshllm calibrate` would tell an operator) and the
// network's bandwidth.
func DefaultNodePolicy(p sim.Profile, n Network) node.Policy {
	pol := node.DefaultPolicy()
	if p.PrefillToken > 0 {
		pol.AssumedPrefillTokPerSec = 1 / p.PrefillToken
	}
	if p.DecodeToken > 0 {
		pol.AssumedDecodeTokPerSec = 1 / p.DecodeToken
	}
	pol.Bandwidth = n.BytesPerSecond()
	return pol
}

// Cluster is one run of a policy over a workload. It is single-threaded.
type Cluster struct {
	cfg    Config
	l      *loop
	model  string
	peers  []*peer
	index  map[node.PeerID]int
	policy Policy
	w      *workload.Workload
	rand   *rand.Rand

	recs        []Record
	completed   int
	outstanding []int // requests sent to each peer and not finished (centralised routers' load)
	errs        int
}

// Record is what happened to one request.
type Record struct {
	ID, Entry, Server int
	// Arrive, First and Done are virtual times: sent by the client, first
	// reply piece at the client, last piece at the client.
	Arrive, First, Done time.Duration
	Prompt, Cached      int
	Forwarded           bool
	// Attempts counts the peers tried (refusals included).
	Attempts int
	// Decide is the wall-clock CPU time the routing decision took.
	Decide time.Duration
}

// Run simulates workload w on a cluster of cfg under policy p and returns
// its metrics.
func Run(cfg Config, w *workload.Workload, p Policy) (*Result, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	for _, s := range w.Sessions {
		if s.Entry >= cfg.Peers {
			return nil, fmt.Errorf("simnet: session enters at peer %d of %d", s.Entry, cfg.Peers)
		}
	}
	c := &Cluster{
		cfg: cfg, l: &loop{}, model: "simnet-" + cfg.Profiles[0].Name, index: map[node.PeerID]int{},
		policy: p, w: w, rand: rand.New(rand.NewPCG(cfg.Seed, 0x73696d6e6574)),
		recs: make([]Record, len(w.Requests)), outstanding: make([]int, cfg.Peers),
	}
	gossip := p.kind() == gossiping
	for i := range cfg.Peers {
		pr, err := c.newPeer(i, cfg.Profiles[i], gossip)
		if err != nil {
			return nil, err
		}
		c.peers = append(c.peers, pr)
		c.index[pr.id] = i
	}
	p.reset(c)
	if gossip {
		c.startGossip(c.rand)
	}
	for _, ch := range cfg.Churn {
		c.l.at(ch.At, func() { c.churn(ch) })
	}
	c.start()
	wallStart := time.Now()
	for c.l.step() {
	}
	if c.completed != len(w.Requests) {
		return nil, fmt.Errorf("simnet: %d of %d requests completed", c.completed, len(w.Requests))
	}
	return c.result(time.Since(wallStart)), nil
}

// start schedules the sessions' first requests: open-loop ones at their
// start, each closed-loop client's first session at once.
func (c *Cluster) start() {
	for i, s := range c.w.Sessions {
		switch {
		case s.Client < 0:
			c.l.at(s.Start, func() { c.arrive(s.Requests[0], s.Entry) })
		case i < c.w.Clients:
			c.l.at(0, func() { c.arrive(s.Requests[0], s.Entry) })
		}
	}
}

func (c *Cluster) done() bool { return c.completed == len(c.w.Requests) }

// complete records request id done and sends what follows it.
func (c *Cluster) complete(id int) {
	c.completed++
	rq := &c.w.Requests[id]
	s := c.w.Sessions[rq.Session]
	if rq.Turn+1 < len(s.Requests) {
		next := &c.w.Requests[s.Requests[rq.Turn+1]]
		c.l.after(next.Think, func() { c.arrive(next.ID, s.Entry) })
		return
	}
	if s.Client >= 0 {
		if n := rq.Session + c.w.Clients; n < len(c.w.Sessions) {
			ns := c.w.Sessions[n]
			first := ns.Requests[0]
			c.l.after(c.w.Requests[first].Think, func() { c.arrive(first, ns.Entry) })
		}
	}
}

func (c *Cluster) churn(ch Churn) {
	p := c.peers[ch.Peer]
	if p.up == ch.Up {
		return
	}
	p.up = ch.Up
	if !ch.Up {
		return
	}
	// Back with an empty cache, a new epoch and a fresh view of the mesh.
	p.eng = newEngine(c.l, p.prof, c.cfg.Running)
	p.speeds = node.NewSpeeds(0, 0, 0)
	if p.mesh != nil {
		p.mesh, _ = node.NewMesh(node.MeshConfig{
			Self: p.id, Model: c.model, BlockSize: c.cfg.BlockSize,
			RTT: rttSource{c: c, self: p.idx}, Policy: c.cfg.Node,
		})
		p.pulling = map[int]bool{}
		if err := c.startAnnounce(p); err != nil {
			c.errs++
		}
	}
}

// live returns entry, or the next live peer after it when it is down.
func (c *Cluster) live(entry int) int {
	for k := range len(c.peers) {
		if i := (entry + k) % len(c.peers); c.peers[i].up {
			return i
		}
	}
	return entry // everyone left: the entry peer serves anyway
}
