package node

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// DefaultMaxPeers is the default of MeshConfig.MaxPeers: the cluster
// view's default (cache.DefaultViewPeers, 128), above the p2p layer's
// connection high-water mark (96). Gossip is accepted only from connected
// topic members, so a mesh of honest peers never fills it.
const DefaultMaxPeers = cache.DefaultViewPeers

// ErrViewFull is returned by Mesh.ApplyDigest for a digest of a peer the
// mesh does not know when it holds MaxPeers and the newcomer ranks no
// higher than any of them in the eviction order (see Mesh).
var ErrViewFull = errors.New("node: mesh view is full")

// TrustSource reports how far a peer's claims can be believed, in [0, 1]
// (1 for a peer never judged); *Trust implements it. It must be safe for
// concurrent use.
type TrustSource interface {
	Get(peer PeerID, now time.Time) float64
}

// SetTrust installs the trust the eviction order consults (NewRouter
// installs its Trust); nil: every peer ranks as fully trusted.
func (m *Mesh) SetTrust(t TrustSource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.trust = t
}

// MeshLimits is what /v1/mesh reports of the view's bounds.
type MeshLimits struct {
	// MaxPeers and MaxReplicaBlocks are the configured limits.
	MaxPeers         int `json:"max_peers"`
	MaxReplicaBlocks int `json:"max_replica_blocks"`
	// Peers is how many peers the mesh holds now.
	Peers int `json:"peers"`
	// Evicted counts peers dropped to admit a higher-ranked one, Refused
	// the digests and loads of new peers turned away because none ranked
	// lower.
	Evicted int64 `json:"evicted"`
	Refused int64 `json:"refused"`
}

// Limits reports the bounds and how often they were reached.
func (m *Mesh) Limits() MeshLimits {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MeshLimits{MaxPeers: m.cfg.MaxPeers, MaxReplicaBlocks: m.cfg.MaxReplicaBlocks,
		Peers: len(m.peers), Evicted: m.evicted, Refused: m.refused}
}

// rank is a peer's place in the eviction order: the lowest goes first.
type rank struct {
	id       PeerID
	measured bool // an RTT is known
	trust    float64
	heard    time.Time // last digest or load
}

// compareRanks orders a before b when a is evicted first: never measured
// before measured, then lower trust, then heard from longer ago. Peers
// equal in all three compare equal (compareIDs breaks the tie only among
// incumbents, so that the choice of victim is deterministic).
func compareRanks(a, b rank) int {
	if a.measured != b.measured {
		if !a.measured {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.trust, b.trust); c != 0 {
		return c
	}
	return a.heard.Compare(b.heard)
}

// lockWithRoom locks m.mu with room for from: from is known, or the mesh
// holds fewer than MaxPeers, or it evicted the lowest-ranked peer because
// from ranks strictly higher. Otherwise it returns ErrViewFull with the
// mutex released. The ranks need the RTT source and the trust, which are
// asked outside the mutex (Mesh calls out while holding nothing), so the
// state is checked again once it is retaken.
func (m *Mesh) lockWithRoom(from PeerID, now time.Time) error {
	m.mu.Lock()
	if m.hasRoom(from) {
		return nil
	}
	ranks := make([]rank, 0, len(m.peers)+1)
	for id, p := range m.peers {
		ranks = append(ranks, rank{id: id, heard: later(p.loadAt, p.digestAt)})
	}
	ranks = append(ranks, rank{id: from, heard: now})
	trust := m.trust
	m.mu.Unlock()

	for i := range ranks {
		ranks[i].trust = 1
		if trust != nil {
			ranks[i].trust = trust.Get(ranks[i].id, now)
		}
		if m.cfg.RTT != nil {
			_, ranks[i].measured = m.cfg.RTT.RTT(ranks[i].id)
		}
	}
	newcomer := ranks[len(ranks)-1]
	incumbents := ranks[:len(ranks)-1]

	m.mu.Lock()
	if m.hasRoom(from) {
		return nil
	}
	var victim *rank
	for i := range incumbents {
		r := &incumbents[i]
		if _, ok := m.peers[r.id]; !ok {
			continue // gone meanwhile
		}
		if victim == nil {
			victim = r
			continue
		}
		if c := compareRanks(*r, *victim); c < 0 || c == 0 && compareIDs(r.id, victim.id) > 0 {
			victim = r
		}
	}
	if victim == nil || compareRanks(newcomer, *victim) <= 0 {
		m.refused++
		n := len(m.peers)
		m.mu.Unlock()
		return fmt.Errorf("%w: %d peers, none ranks below %s", ErrViewFull, n, from)
	}
	m.evicted++
	delete(m.peers, victim.id)
	m.view.Remove(string(victim.id))
	return nil
}

// hasRoom reports whether from may enter or stay; m.mu must be held.
func (m *Mesh) hasRoom(from PeerID) bool {
	_, ok := m.peers[from]
	return ok || len(m.peers) < m.cfg.MaxPeers
}
