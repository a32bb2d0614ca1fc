package node

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// Load is a peer's load announcement, published every announce interval.
type Load struct {
	// QueueDepth is the requests waiting for a slot, Active those holding
	// one, Slots the engine's parallel sequences.
	QueueDepth int `json:"queue_depth"`
	Active     int `json:"active"`
	Slots      int `json:"slots"`
	// PushBack: the peer refuses forwarded work for now.
	PushBack bool `json:"push_back"`
	// PrefillTokPerSec and DecodeTokPerSec are the peer's measured speeds
	// (EWMAs over served requests; 0 before the first).
	PrefillTokPerSec float64 `json:"prefill_tok_per_sec"`
	DecodeTokPerSec  float64 `json:"decode_tok_per_sec"`
	// Seq grows with every announcement of one announcer; it starts at the
	// announcer's start time in nanoseconds, so it also grows across
	// restarts. Older or equal announcements are ignored.
	Seq uint64 `json:"seq"`
}

// RTTSource reports the measured round-trip time to a peer; ok is false
// before the first measurement. The p2p layer implements it; it must be
// safe for concurrent use.
type RTTSource interface {
	RTT(peer PeerID) (rtt time.Duration, ok bool)
}

// RelaySource is optionally implemented by an RTTSource: Relayed reports
// whether the only connection to the peer goes through a circuit relay.
type RelaySource interface {
	Relayed(peer PeerID) bool
}

// MeshConfig configures a Mesh.
type MeshConfig struct {
	// Self is this peer's ID: digests and loads claiming it are refused.
	Self PeerID
	// Model is the model's identity (infer.ModelInfo.ID), which seeds the
	// digests' hashes; ModelName is its display name for /v1/mesh.
	Model, ModelName string
	// BlockSize is the digests' block size; 0 means cache.DefaultBlockSize.
	BlockSize int
	// RTT measures links; nil means every RTT is unknown.
	RTT RTTSource
	// Policy supplies the cooldowns and the load TTL.
	Policy Policy
	// PeerTTL is how long a silent peer (no digest and no load) stays in
	// the view; 0 means 3 x Policy.LoadTTL.
	PeerTTL time.Duration
	// MaxPeers bounds the peers the mesh holds (replicas, loads); 0 means
	// DefaultMaxPeers. See Mesh for the eviction order.
	MaxPeers int
	// MaxReplicaBlocks bounds the blocks each peer's replica holds; 0
	// means cache.DefaultReplicaBlocks (see cache.Replica).
	MaxReplicaBlocks int
	// HashKey keys the block hashes the view matches prompts with
	// (cache.NewKeyedHasher): the key of this peer's cache.Source, which
	// every peer of the private mesh shares. nil: unkeyed (an open mesh).
	HashKey []byte
}

// ErrWrongAuthor is returned by Mesh.ApplyDigest for a digest whose
// embedded peer ID is not its sender's.
var ErrWrongAuthor = errors.New("node: digest's peer is not its sender")

// Mesh is this peer's view of the others serving the same model: a
// cache.ClusterView of their digests, their load announcements, the RTT
// source, and the push-back cooldowns and failure counts the router sets.
//
// The mesh holds at most MeshConfig.MaxPeers peers, each replica at most
// MaxReplicaBlocks blocks, so memory stays bounded whatever gossip
// arrives (docs/digests.md has the figures). A digest or load of a new
// peer when the mesh is full evicts the lowest-ranked peer if the
// newcomer ranks strictly higher, and is refused otherwise (ErrViewFull).
// The eviction order, lowest first: peers never measured (no RTT), then
// lower trust (SetTrust), then least recently heard from (digest or
// load). A newcomer counts as heard now, so among measured, equally
// trusted peers it takes the place of the one silent longest; a full mesh
// of measured peers refuses unmeasured newcomers until their RTT is known.
//
// Mesh is safe for concurrent use: one mutex guards all of its state; no
// method blocks on anything but that mutex, and none calls out while
// holding it (View and the eviction order ask the RTTSource and the
// trust after releasing it).
type Mesh struct {
	cfg MeshConfig

	mu     sync.Mutex
	view   *cache.ClusterView
	peers  map[PeerID]*meshPeer
	scores cache.Scores // scratch for View
	trust  TrustSource  // for the eviction order; nil: all 1

	evicted, refused int64
}

// meshPeer is what Mesh keeps per peer besides its replica.
type meshPeer struct {
	load          Load
	loadAt        time.Time // zero: never heard
	digestAt      time.Time // last digest received, applied or not
	cooldownUntil time.Time
	cooldownWhy   string
	failures      int
}

// NewMesh returns an empty mesh.
func NewMesh(cfg MeshConfig) (*Mesh, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = cache.DefaultBlockSize
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("node: MeshConfig.Model is empty")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.PeerTTL <= 0 {
		cfg.PeerTTL = 3 * cfg.Policy.LoadTTL
	}
	if cfg.ModelName == "" {
		cfg.ModelName = cfg.Model
	}
	if cfg.MaxPeers < 0 || cfg.MaxReplicaBlocks < 0 {
		return nil, fmt.Errorf("node: MeshConfig.MaxPeers %d, MaxReplicaBlocks %d: want >= 0", cfg.MaxPeers, cfg.MaxReplicaBlocks)
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	if cfg.MaxReplicaBlocks == 0 {
		cfg.MaxReplicaBlocks = cache.DefaultReplicaBlocks
	}
	hasher, err := cache.NewKeyedHasher(cfg.Model, cfg.BlockSize, cfg.HashKey)
	if err != nil {
		return nil, err
	}
	view := cache.NewClusterViewHasher(hasher, cfg.Model, cache.ViewLimits{MaxPeers: cfg.MaxPeers, MaxBlocks: cfg.MaxReplicaBlocks})
	return &Mesh{cfg: cfg, view: view, peers: map[PeerID]*meshPeer{}}, nil
}

// Policy returns the policy the mesh was configured with.
func (m *Mesh) Policy() Policy { return m.cfg.Policy }

// Self returns this peer's ID.
func (m *Mesh) Self() PeerID { return m.cfg.Self }

func (m *Mesh) peer(id PeerID) *meshPeer {
	p, ok := m.peers[id]
	if !ok {
		p = &meshPeer{}
		m.peers[id] = p
	}
	return p
}

// ApplyDigest feeds a digest (snapshot or delta) from peer from. It returns
// true when the peer's replica needs a snapshot (a gap or a new epoch): the
// caller should pull one and apply it. A digest whose embedded peer is not
// from fails with ErrWrongAuthor; one for another model or block size, or
// an invalid one, fails with the cache package's error; one of a new peer
// that the full mesh does not admit (see Mesh) fails with ErrViewFull.
// now is the receiver's clock.
func (m *Mesh) ApplyDigest(from PeerID, d *cache.Digest, now time.Time) (needSnapshot bool, err error) {
	if d == nil {
		return false, fmt.Errorf("node: nil digest")
	}
	if PeerID(d.Peer) != from {
		return false, fmt.Errorf("%w: %q from %q", ErrWrongAuthor, d.Peer, from)
	}
	if from == m.cfg.Self {
		return false, nil
	}
	if d.Model != m.cfg.Model || d.BlockSize != m.cfg.BlockSize {
		// Checked before admission: a digest that cannot apply must not
		// evict anyone.
		return false, fmt.Errorf("%w: model %q block size %d, mesh has %q %d", cache.ErrMismatch,
			d.Model, d.BlockSize, m.cfg.Model, m.cfg.BlockSize)
	}
	if err := d.Validate(); err != nil {
		return false, err
	}
	if err := m.lockWithRoom(from, now); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	out, err := m.view.Apply(d, now.UnixNano())
	if errors.Is(err, cache.ErrViewFull) {
		return false, fmt.Errorf("%w: %w", ErrViewFull, err)
	}
	if err != nil {
		return false, err
	}
	m.peer(from).digestAt = now
	return out == cache.Gap || out == cache.NewEpoch || m.replicaNeeds(from), nil
}

func (m *Mesh) replicaNeeds(id PeerID) bool {
	r := m.view.Replica(string(id))
	return r != nil && r.NeedsSnapshot()
}

// ApplyLoad records a load announcement from a peer. An announcement with
// a Seq not above the last one's is ignored (reordered gossip), unless the
// last one has expired (the peer restarted with a clock behind).
// A new peer's announcement is dropped when the full mesh does not admit
// it (see Mesh).
func (m *Mesh) ApplyLoad(from PeerID, l Load, now time.Time) {
	if from == m.cfg.Self {
		return
	}
	if m.lockWithRoom(from, now) != nil {
		return // a full mesh that ranks the newcomer last (see Mesh)
	}
	defer m.mu.Unlock()
	p := m.peer(from)
	if !p.loadAt.IsZero() && l.Seq <= p.load.Seq && now.Sub(p.loadAt) <= m.cfg.Policy.LoadTTL {
		return
	}
	p.load, p.loadAt = l, now
}

// PeerDown forgets a peer (its connection closed, or it left the topic).
func (m *Mesh) PeerDown(id PeerID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.peers, id)
	m.view.Remove(string(id))
}

// MarkFailure records that a request forwarded to id failed by the peer's
// fault (error, timeout, reset, a reply out of the request's bounds, a
// refusal of a request the origin serves): the peer is skipped for
// Policy.FailureCooldown, doubled for each further consecutive failure.
func (m *Mesh) MarkFailure(id PeerID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peer(id)
	p.failures++
	p.cooldownUntil = now.Add(m.cfg.Policy.failureCooldown(p.failures))
	p.cooldownWhy = "failure"
}

// MarkBusy records that id refused a forwarded request as busy: it is
// skipped for Policy.PushBackCooldown.
func (m *Mesh) MarkBusy(id PeerID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peer(id)
	p.cooldownUntil = later(p.cooldownUntil, now.Add(m.cfg.Policy.PushBackCooldown))
	p.cooldownWhy = "busy"
}

// MarkSuccess records that id served a forwarded request: its failure
// count starts over.
func (m *Mesh) MarkSuccess(id PeerID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.peers[id]; ok {
		p.failures = 0
	}
}

// NeedSnapshots returns the peers whose replicas need a snapshot, sorted.
func (m *Mesh) NeedSnapshots() []PeerID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PeerID
	for _, id := range m.view.NeedSnapshots() {
		out = append(out, PeerID(id))
	}
	return out
}

// Expire forgets the peers silent (no digest, no load) for longer than
// MeshConfig.PeerTTL, and returns them, sorted.
func (m *Mesh) Expire(now time.Time) []PeerID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gone []PeerID
	for id, p := range m.peers {
		if now.Sub(later(p.loadAt, p.digestAt)) > m.cfg.PeerTTL {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		delete(m.peers, id)
		m.view.Remove(string(id))
	}
	return gone
}

// Len returns the number of peers known.
func (m *Mesh) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.peers)
}

// View builds the view Decide needs for a prompt: local as given, and for
// every known peer its estimated match (one walk of the prompt's block
// chain over all replicas), load, RTT, cooldown and failures; peers sorted
// by ID.
func (m *Mesh) View(prompt []int32, local LocalView, now time.Time) View {
	v := View{Now: now, Local: local}
	m.mu.Lock()
	m.view.Score(prompt, nil, now.UnixNano(), &m.scores)
	est := make(map[PeerID]cache.Estimate, len(m.scores.Peers))
	for _, e := range m.scores.Peers {
		est[PeerID(e.Peer)] = e
	}
	v.Peers = make([]PeerView, 0, len(m.peers))
	for id, p := range m.peers {
		pv := PeerView{ID: id, CooldownUntil: p.cooldownUntil, Failures: p.failures}
		if e, ok := est[id]; ok {
			pv.EstimatedCached, pv.EstimateAge, pv.Gap = e.Tokens, e.Age, e.NeedsSnapshot
		}
		if !p.loadAt.IsZero() {
			l := p.load
			pv.QueueDepth, pv.Active, pv.Slots, pv.PushBack = l.QueueDepth, l.Active, l.Slots, l.PushBack
			pv.PrefillTokPerSec, pv.DecodeTokPerSec = l.PrefillTokPerSec, l.DecodeTokPerSec
			pv.LoadAge = now.Sub(p.loadAt)
		}
		v.Peers = append(v.Peers, pv)
	}
	m.mu.Unlock()
	slices.SortFunc(v.Peers, func(a, b PeerView) int { return compareIDs(a.ID, b.ID) })
	m.links(v.Peers)
	return v
}

// links fills RTT and relay facts in, outside the mutex.
func (m *Mesh) links(peers []PeerView) {
	if m.cfg.RTT == nil {
		return
	}
	relay, _ := m.cfg.RTT.(RelaySource)
	for i := range peers {
		peers[i].RTT, peers[i].RTTKnown = m.cfg.RTT.RTT(peers[i].ID)
		if relay != nil {
			peers[i].Relayed = relay.Relayed(peers[i].ID)
		}
	}
}

func compareIDs(a, b PeerID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
