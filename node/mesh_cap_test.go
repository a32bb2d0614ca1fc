package node

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// snapshotOf is a snapshot digest of peer listing n hashes from base on.
func snapshotOf(peer string, base, n int) *cache.Digest {
	hs := make([]cache.Hash, n)
	for i := range hs {
		hs[i] = cache.Hash(base + i + 1)
	}
	return &cache.Digest{Kind: cache.KindSnapshot, Peer: peer, Model: "m", BlockSize: cache.DefaultBlockSize,
		Epoch: 1, Seq: 1, Hashes: hs, Held: n}
}

// TestMeshCapsSybilDigests is the flood at the mesh (what the p2p layer's
// connected-members check would let through if it were bypassed): 2,000
// identities, each with its own digest, and one digest far over the block
// limit. The mesh holds at most MaxPeers replicas, each at most
// MaxReplicaBlocks blocks, and counts what it turned away.
func TestMeshCapsSybilDigests(t *testing.T) {
	const identities, hashes = 2000, 64
	m := newMeshT(t, nil)
	var full int
	for i := range identities {
		id := fmt.Sprintf("sybil-%04d", i)
		_, err := m.ApplyDigest(PeerID(id), snapshotOf(id, i*hashes, hashes), t0)
		switch {
		case errors.Is(err, ErrViewFull):
			full++
		case err != nil:
			t.Fatal(err)
		}
	}
	lim := m.Limits()
	if m.Len() != DefaultMaxPeers || lim.Peers != DefaultMaxPeers || lim.MaxPeers != DefaultMaxPeers {
		t.Fatalf("%d peers in the view after %d identities, limits %+v; want %d", m.Len(), identities, lim, DefaultMaxPeers)
	}
	// Equal ranks (none measured, same trust, same time): the incumbents
	// stay, every later identity is refused.
	if full != identities-DefaultMaxPeers || lim.Refused != int64(full) || lim.Evicted != 0 {
		t.Fatalf("%d refused (limits %+v), want %d and no eviction", full, lim, identities-DefaultMaxPeers)
	}
	blocks := 0
	for _, p := range m.Peers(t0) {
		blocks += p.DigestKnown
	}
	if blocks != DefaultMaxPeers*hashes {
		t.Fatalf("%d blocks in the view, want %d", blocks, DefaultMaxPeers*hashes)
	}

	// One incumbent sends a snapshot 4x the block limit.
	big := snapshotOf("sybil-0000", 1<<30, 4*cache.DefaultReplicaBlocks)
	big.Seq = 2
	if _, err := m.ApplyDigest("sybil-0000", big, t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Peers(t0) {
		if p.Peer == "sybil-0000" && (p.DigestKnown != cache.DefaultReplicaBlocks || !p.DigestTruncated || p.DigestBlocks != 4*cache.DefaultReplicaBlocks) {
			t.Fatalf("over-limit replica: %+v", p)
		}
	}
}

// fakeRanks is an RTT source and a trust source for the eviction order.
type fakeRanks struct {
	mu       sync.Mutex
	measured map[PeerID]bool
	trust    map[PeerID]float64
}

func (f *fakeRanks) RTT(p PeerID) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Millisecond, f.measured[p]
}

func (f *fakeRanks) Get(p PeerID, _ time.Time) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.trust[p]; ok {
		return v
	}
	return 1
}

// TestMeshEvictionOrder: a full mesh evicts peers never measured first,
// then the least trusted, then the least recently heard, and refuses a
// newcomer that ranks no higher than any incumbent.
func TestMeshEvictionOrder(t *testing.T) {
	ranks := &fakeRanks{measured: map[PeerID]bool{"A": true, "B": true, "D": true, "E": true, "G": true},
		trust: map[PeerID]float64{"B": 0.3}}
	m, err := NewMesh(MeshConfig{Self: "self", Model: "m", RTT: ranks, Policy: DefaultPolicy(), MaxPeers: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.SetTrust(ranks)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	apply := func(id string, s int) error {
		_, err := m.ApplyDigest(PeerID(id), snapshotOf(id, 0, 4), at(s))
		return err
	}
	members := func() string {
		var ids []PeerID
		for _, p := range m.Peers(at(100)) {
			ids = append(ids, p.Peer)
		}
		return fmt.Sprint(ids)
	}
	for i, id := range []string{"A", "B", "C"} { // C is never measured
		if err := apply(id, i); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		id   string
		at   int
		want string
		full bool
	}{
		{"D", 3, "[A B D]", false},  // C: never measured
		{"E", 4, "[A D E]", false},  // B: lowest trust
		{"F", 5, "[A D E]", true},   // F is not measured: ranks below everyone
		{"G", 10, "[D E G]", false}, // A: heard from longest ago
		{"H", 11, "[D E G]", true},
	}
	for _, s := range steps {
		err := apply(s.id, s.at)
		if errors.Is(err, ErrViewFull) != s.full || (err != nil && !s.full) {
			t.Fatalf("%s: err %v, want full=%v", s.id, err, s.full)
		}
		if got := members(); got != s.want {
			t.Fatalf("after %s: %s, want %s", s.id, got, s.want)
		}
	}
	// A load from an unmeasured newcomer is dropped too; a known peer's
	// load refreshes it (D heard at 20: E is now the oldest).
	m.ApplyLoad("H", Load{Slots: 1, Seq: 1}, at(20))
	m.ApplyLoad("D", Load{Slots: 1, Seq: 1}, at(20))
	if got := members(); got != "[D E G]" {
		t.Fatalf("after loads: %s", got)
	}
	ranks.mu.Lock()
	ranks.measured["H"] = true
	ranks.mu.Unlock()
	m.ApplyLoad("H", Load{Slots: 1, Seq: 1}, at(21))
	if got := members(); got != "[D G H]" {
		t.Fatalf("after a measured newcomer's load: %s, want E evicted", got)
	}
	// A digest that cannot apply evicts nobody.
	bad := snapshotOf("Z", 0, 1)
	bad.Model = "other"
	ranks.mu.Lock()
	ranks.measured["Z"] = true
	ranks.mu.Unlock()
	if _, err := m.ApplyDigest("Z", bad, at(30)); !errors.Is(err, cache.ErrMismatch) {
		t.Fatalf("another model's digest: %v", err)
	}
	if got, lim := members(), m.Limits(); got != "[D G H]" || lim.Evicted != 4 || lim.Refused != 3 {
		t.Fatalf("%s, limits %+v; want 4 evicted, 3 refused", got, lim)
	}
}

// TestMeshBelowCapKeepsEveryone: an honest mesh smaller than the limit
// keeps every replica, whatever its peers' ranks.
func TestMeshBelowCapKeepsEveryone(t *testing.T) {
	m := newMeshT(t, nil)
	for i := range DefaultMaxPeers - 1 {
		id := fmt.Sprintf("peer-%03d", i)
		if _, err := m.ApplyDigest(PeerID(id), snapshotOf(id, i*100, 100), t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if lim := m.Limits(); lim.Peers != DefaultMaxPeers-1 || lim.Evicted != 0 || lim.Refused != 0 {
		t.Fatalf("limits %+v", lim)
	}
	for _, p := range m.Peers(t0) {
		if p.DigestKnown != 100 || p.DigestTruncated {
			t.Fatalf("%+v", p)
		}
	}
	if _, err := NewMesh(MeshConfig{Model: "m", Policy: DefaultPolicy(), MaxPeers: -1}); err == nil {
		t.Fatal("a negative MaxPeers was accepted")
	}
}

// TestMeshCapConcurrent floods a small mesh from many goroutines (run with
// -race): the limit holds under concurrent admission and eviction.
func TestMeshCapConcurrent(t *testing.T) {
	ranks := &fakeRanks{measured: map[PeerID]bool{}, trust: map[PeerID]float64{}}
	m, err := NewMesh(MeshConfig{Self: "self", Model: "m", RTT: ranks, Policy: DefaultPolicy(), MaxPeers: 8})
	if err != nil {
		t.Fatal(err)
	}
	m.SetTrust(ranks)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("g%d-%03d", g, i)
				now := t0.Add(time.Duration(i) * time.Second)
				m.ApplyDigest(PeerID(id), snapshotOf(id, i, 8), now)
				m.ApplyLoad(PeerID(id), Load{Seq: 1}, now)
				m.View(nil, LocalView{}, now)
			}
		})
	}
	wg.Wait()
	if lim := m.Limits(); lim.Peers > 8 || m.Len() > 8 || lim.Evicted == 0 {
		t.Fatalf("limits %+v, %d peers", lim, m.Len())
	}
}

// TestMeasureMeshSybilHeap prints the heap the mesh takes when 2,000
// identities x 2,000 hashes reach ApplyDigest directly (the p2p layer's
// connected-members check bypassed): the limits alone bound it.
//
//	MESHLLM_MEASURE=1 go test ./node -run TestMeasureMeshSybilHeap -v -count=1
func TestMeasureMeshSybilHeap(t *testing.T) {
	if os.Getenv("MESHLLM_MEASURE") == "" {
		t.Skip("set MESHLLM_MEASURE=1 to measure the mesh's heap under a Sybil flood")
	}
	const identities, hashes = 2000, 2000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := newMeshT(t, nil)
	for i := range identities {
		id := fmt.Sprintf("sybil-%04d", i)
		m.ApplyDigest(PeerID(id), snapshotOf(id, i*hashes, hashes), t0.Add(time.Duration(i)*time.Millisecond))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	lim := m.Limits()
	t.Logf("%d identities x %d hashes into Mesh.ApplyDigest: heap %+.1f MiB; %d peers, %d evicted, %d refused",
		identities, hashes, (float64(after.HeapAlloc)-float64(before.HeapAlloc))/(1<<20), lim.Peers, lim.Evicted, lim.Refused)
	runtime.KeepAlive(m)
}
