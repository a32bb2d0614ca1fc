package node

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
)

func newMeshT(t testing.TB, rtt RTTSource) *Mesh {
	t.Helper()
	m, err := NewMesh(MeshConfig{Self: "self", Model: "m", RTT: rtt, Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func digestOf(t testing.TB, peer string, seqs ...[]int32) (*cache.Source, *cache.Tree, *cache.Digest) {
	t.Helper()
	src, err := cache.NewSource(cache.SourceConfig{Peer: peer, Model: "m", Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	tree := cache.NewTree(8, 1<<16)
	for i, s := range seqs {
		tree.Set(cache.Handle(i), s, 1)
	}
	d, _ := src.Update(tree)
	return src, tree, d
}

func TestMeshApplyDigest(t *testing.T) {
	m := newMeshT(t, nil)
	_, _, d := digestOf(t, "B", prompt(1, 64))
	if _, err := m.ApplyDigest("C", d, t0); !errors.Is(err, ErrWrongAuthor) {
		t.Fatalf("forged author: %v", err)
	}
	_, _, other := digestOf(t, "B", prompt(1, 64))
	other.Model = "other"
	if _, err := m.ApplyDigest("B", other, t0); !errors.Is(err, cache.ErrMismatch) {
		t.Fatalf("other model: %v", err)
	}
	_, _, self := digestOf(t, "self", prompt(1, 64))
	if _, err := m.ApplyDigest("self", self, t0); err != nil || m.Len() != 0 {
		t.Fatalf("own digest: %v, %d peers", err, m.Len())
	}
	need, err := m.ApplyDigest("B", d, t0)
	if err != nil || need {
		t.Fatalf("need %v err %v", need, err)
	}
	v := m.View(prompt(1, 80), LocalView{}, t0.Add(time.Second))
	if len(v.Peers) != 1 || v.Peers[0].EstimatedCached != 64 || v.Peers[0].EstimateAge != time.Second || v.Peers[0].RTTKnown {
		t.Fatalf("view %+v", v.Peers)
	}
	if v.Peers[0].Slots != 0 {
		t.Fatal("load invented")
	}
}

func TestMeshGapNeedsSnapshot(t *testing.T) {
	m := newMeshT(t, nil)
	src, tree, d := digestOf(t, "B", prompt(1, 32))
	m.ApplyDigest("B", d, t0)
	tree.Set(1, prompt(2, 32), 2)
	src.Update(tree) // lost
	tree.Set(2, prompt(3, 32), 3)
	d3, _ := src.Update(tree)
	need, err := m.ApplyDigest("B", d3, t0)
	if err != nil || !need {
		t.Fatalf("gap: need %v err %v", need, err)
	}
	if got := m.NeedSnapshots(); fmt.Sprint(got) != "[B]" {
		t.Fatalf("NeedSnapshots %v", got)
	}
	if v := m.View(prompt(1, 32), LocalView{}, t0); !v.Peers[0].Gap {
		t.Fatal("gap not reported in the view")
	}
	if need, _ := m.ApplyDigest("B", src.Snapshot(), t0); need {
		t.Fatal("still needs a snapshot")
	}
	if v := m.View(prompt(2, 32), LocalView{}, t0); v.Peers[0].EstimatedCached != 32 || v.Peers[0].Gap {
		t.Fatalf("after snapshot %+v", v.Peers[0])
	}
}

func TestMeshLoadOrdering(t *testing.T) {
	m := newMeshT(t, nil)
	m.ApplyLoad("B", Load{Slots: 4, QueueDepth: 1, Seq: 10}, t0)
	m.ApplyLoad("B", Load{Slots: 4, QueueDepth: 9, Seq: 9}, t0.Add(time.Second)) // reordered: ignored
	v := m.View(nil, LocalView{}, t0.Add(2*time.Second))
	if v.Peers[0].QueueDepth != 1 || v.Peers[0].LoadAge != 2*time.Second {
		t.Fatalf("view %+v", v.Peers[0])
	}
	// A restarted peer with a lower Seq is accepted once the old load expired.
	m.ApplyLoad("B", Load{Slots: 4, QueueDepth: 3, Seq: 1}, t0.Add(11*time.Second))
	if v := m.View(nil, LocalView{}, t0.Add(11*time.Second)); v.Peers[0].QueueDepth != 3 {
		t.Fatalf("restart not accepted: %+v", v.Peers[0])
	}
	m.ApplyLoad("self", Load{Slots: 1, Seq: 99}, t0)
	if m.Len() != 1 {
		t.Fatal("own load recorded")
	}
}

func TestMeshCooldowns(t *testing.T) {
	m := newMeshT(t, nil)
	m.ApplyLoad("B", Load{Slots: 4, Seq: 1}, t0)
	m.MarkFailure("B", t0)
	m.MarkFailure("B", t0)
	v := m.View(nil, LocalView{}, t0)
	if v.Peers[0].Failures != 2 || !v.Peers[0].CooldownUntil.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("after 2 failures %+v", v.Peers[0])
	}
	m.MarkSuccess("B")
	m.MarkBusy("B", t0)
	v = m.View(nil, LocalView{}, t0)
	if v.Peers[0].Failures != 0 || !v.Peers[0].CooldownUntil.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("after busy %+v", v.Peers[0])
	}
	st := m.Peers(t0)
	if st[0].CooldownReason != "busy" || st[0].Load == nil {
		t.Fatalf("status %+v", st[0])
	}
	if st := m.Peers(t0.Add(6 * time.Second)); st[0].CooldownUntil != nil {
		t.Fatal("cooldown reported after it ended")
	}
}

func TestMeshExpireAndDown(t *testing.T) {
	m := newMeshT(t, nil)
	_, _, d := digestOf(t, "B", prompt(1, 32))
	m.ApplyDigest("B", d, t0)
	m.ApplyLoad("C", Load{Slots: 4, Seq: 1}, t0.Add(20*time.Second))
	if gone := m.Expire(t0.Add(31 * time.Second)); fmt.Sprint(gone) != "[B]" {
		t.Fatalf("expired %v", gone)
	}
	m.PeerDown("C")
	if m.Len() != 0 || len(m.View(prompt(1, 32), LocalView{}, t0).Peers) != 0 {
		t.Fatal("peers left")
	}
}

// TestMeshConcurrent exercises every method from many goroutines; run
// with -race.
func TestMeshConcurrent(t *testing.T) {
	m := newMeshT(t, fixedRTT(time.Millisecond))
	var wg sync.WaitGroup
	for p := range 4 {
		id := fmt.Sprintf("P%d", p)
		wg.Go(func() {
			src, tree, d := digestOf(t, id, prompt(p, 64))
			for i := range 50 {
				m.ApplyDigest(PeerID(id), d, t0)
				m.ApplyLoad(PeerID(id), Load{Slots: 4, Seq: uint64(i + 1)}, t0)
				tree.Set(cache.Handle(i%8), prompt(p*100+i, 48), int64(i))
				d, _ = src.Update(tree)
				if i%10 == 0 {
					m.MarkFailure(PeerID(id), t0)
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				m.View(prompt(p, 64), LocalView{}, t0)
				m.Peers(t0)
				m.NeedSnapshots()
			}
		})
	}
	wg.Wait()
	if m.Len() != 4 {
		t.Fatalf("%d peers", m.Len())
	}
}

func BenchmarkMeshView(b *testing.B) {
	for _, peers := range []int{4, 32} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			m := newMeshT(b, fixedRTT(time.Millisecond))
			for p := range peers {
				var seqs [][]int32
				for s := range 8 {
					seqs = append(seqs, prompt(p*8+s, 1024))
				}
				_, _, d := digestOf(b, fmt.Sprintf("P%02d", p), seqs...)
				m.ApplyDigest(PeerID(d.Peer), d, t0)
				m.ApplyLoad(PeerID(d.Peer), Load{Slots: 4, Seq: 1}, t0)
			}
			q := append(prompt(3, 1024), prompt(99, 64)...)
			local := LocalView{Slots: 4}
			p := DefaultPolicy()
			b.ReportAllocs()
			for b.Loop() {
				Decide(Route{PromptTokens: len(q), MaxTokens: 16}, m.View(q, local, t0), p)
			}
		})
	}
}
