package node

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// TestMeshHashKey: a mesh keyed like its peers' sources finds the prefix
// they hold; one with another key, or none (an outsider reading the
// digest), finds nothing.
func TestMeshHashKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	p := prompt(3, 256)
	src, err := cache.NewSource(cache.SourceConfig{Peer: "B", Model: "m", Epoch: 1, HashKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tree := cache.NewTree(2, 1<<12)
	tree.Set(0, p, 1)
	d, _ := src.Update(tree)
	for _, c := range []struct {
		name string
		key  []byte
		want int
	}{{"same key", key, 256}, {"other key", bytes.Repeat([]byte{8}, 32), 0}, {"no key", nil, 0}} {
		m, err := NewMesh(MeshConfig{Self: "A", Model: "m", Policy: DefaultPolicy(), HashKey: c.key})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if _, err := m.ApplyDigest("B", d, now); err != nil {
			t.Fatal(err)
		}
		v := m.View(p, LocalView{}, now)
		if len(v.Peers) != 1 || v.Peers[0].EstimatedCached != c.want {
			t.Errorf("%s: peers %+v, want B holding %d tokens", c.name, v.Peers, c.want)
		}
	}
	if _, err := NewMesh(MeshConfig{Self: "A", Model: "m", Policy: DefaultPolicy(), HashKey: []byte("short")}); err == nil {
		t.Error("a 5-byte hash key was accepted")
	}
}
