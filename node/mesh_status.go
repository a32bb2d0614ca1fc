package node

import (
	"slices"
	"time"
)

// PeerStatus is what /v1/mesh reports of one peer.
type PeerStatus struct {
	Peer  PeerID `json:"peer"`
	Model string `json:"model"`
	// RTT in milliseconds; absent before the first measurement.
	RTTMillis *float64 `json:"rtt_ms,omitempty"`
	Relayed   bool     `json:"relayed,omitempty"`
	// Load is the last announcement, LoadAgeMillis its age; absent when
	// none was heard.
	Load          *Load    `json:"load,omitempty"`
	LoadAgeMillis *float64 `json:"load_age_ms,omitempty"`
	// DigestBlocks is how many blocks the peer says its cache holds,
	// DigestKnown how many hashes the replica knows exactly, DigestBloom
	// whether it answers partly from a Bloom filter, DigestAgeMillis how
	// old its state is, NeedsSnapshot whether it missed a change,
	// DigestTruncated whether MeshConfig.MaxReplicaBlocks cut it (its
	// estimates may fall short).
	DigestBlocks    int      `json:"digest_blocks"`
	DigestKnown     int      `json:"digest_known"`
	DigestBloom     bool     `json:"digest_bloom,omitempty"`
	DigestAgeMillis *float64 `json:"digest_age_ms,omitempty"`
	NeedsSnapshot   bool     `json:"needs_snapshot,omitempty"`
	DigestTruncated bool     `json:"digest_truncated,omitempty"`
	// CooldownUntil is set while the peer is skipped; CooldownReason is
	// "busy" or "failure".
	CooldownUntil  *time.Time `json:"cooldown_until,omitempty"`
	CooldownReason string     `json:"cooldown_reason,omitempty"`
	Failures       int        `json:"failures,omitempty"`
	// Trust is the router's trust in the peer's claims, in [0, 1] (see
	// Trust); absent when trust is off.
	Trust *float64 `json:"trust,omitempty"`
}

// Peers reports every known peer, sorted by ID, for /v1/mesh and
// `meshllm peers`.
func (m *Mesh) Peers(now time.Time) []PeerStatus {
	m.mu.Lock()
	out := make([]PeerStatus, 0, len(m.peers))
	for id, p := range m.peers {
		s := PeerStatus{Peer: id, Model: m.cfg.ModelName, Failures: p.failures}
		if !p.loadAt.IsZero() {
			l := p.load
			s.Load, s.LoadAgeMillis = &l, millis(now.Sub(p.loadAt))
		}
		if r := m.view.Replica(string(id)); r != nil {
			s.DigestBlocks, s.DigestKnown, s.DigestBloom = r.Held(), r.Len(), r.Bloom()
			s.NeedsSnapshot, s.DigestTruncated = r.NeedsSnapshot(), r.Truncated()
			if !p.digestAt.IsZero() {
				s.DigestAgeMillis = millis(r.Age(now.UnixNano()))
			}
		}
		if now.Before(p.cooldownUntil) {
			until := p.cooldownUntil
			s.CooldownUntil, s.CooldownReason = &until, p.cooldownWhy
		}
		out = append(out, s)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b PeerStatus) int { return compareIDs(a.Peer, b.Peer) })
	if m.cfg.RTT != nil {
		relay, _ := m.cfg.RTT.(RelaySource)
		for i := range out {
			if rtt, ok := m.cfg.RTT.RTT(out[i].Peer); ok {
				out[i].RTTMillis = millis(rtt)
			}
			if relay != nil {
				out[i].Relayed = relay.Relayed(out[i].Peer)
			}
		}
	}
	return out
}

func millis(d time.Duration) *float64 {
	v := float64(d) / float64(time.Millisecond)
	return &v
}
