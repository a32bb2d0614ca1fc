package simnet

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer/sim"
	"github.com/meshllm/meshllm/node"
)

// peer is one simulated meshllm peer.
type peer struct {
	idx  int
	id   node.PeerID
	eng  *engine
	prof sim.Profile

	// Gossip state, present when the policy uses it.
	mesh     *node.Mesh
	announce *node.Announce
	speeds   *node.Speeds
	pulling  map[int]bool // snapshot pulls in flight, by source peer

	up      bool
	served  int
	gossipB int64 // gossip bytes received
}

// newPeer builds peer i; gossip wires its Mesh and Announce loop.
func (c *Cluster) newPeer(i int, prof sim.Profile, gossip bool) (*peer, error) {
	p := &peer{idx: i, id: peerID(i), prof: prof, up: true, speeds: node.NewSpeeds(0, 0, 0)}
	p.eng = newEngine(c.l, prof, c.cfg.Running)
	if !gossip {
		return p, nil
	}
	var err error
	p.mesh, err = node.NewMesh(node.MeshConfig{
		Self: p.id, Model: c.model, BlockSize: c.cfg.BlockSize,
		RTT: rttSource{c: c, self: i}, Policy: c.cfg.Node,
	})
	if err != nil {
		return nil, err
	}
	if err := c.startAnnounce(p); err != nil {
		return nil, err
	}
	p.pulling = map[int]bool{}
	return p, nil
}

// startAnnounce gives p a fresh digest source (a new epoch: a restarted
// peer's cache starts empty) and announce loop.
func (c *Cluster) startAnnounce(p *peer) error {
	src, err := cache.NewSource(cache.SourceConfig{
		Peer: string(p.id), Model: c.model, BlockSize: c.cfg.BlockSize,
		Epoch: uint64(wall(c.l.now).UnixNano()),
	})
	if err != nil {
		return err
	}
	p.announce, err = node.NewAnnounce(node.AnnounceConfig{
		Cache: p.eng, Stats: p.eng, Source: src, Publish: publisher{c: c, from: p.idx},
		Speeds: p.speeds, Policy: c.cfg.Node, Interval: c.cfg.Announce,
		SnapshotEvery: c.cfg.SnapshotEvery, Now: func() time.Time { return wall(c.l.now) },
	})
	return err
}

func peerID(i int) node.PeerID { return node.PeerID(fmt.Sprintf("peer-%04d", i)) }

// publisher is a peer's node.Announcer: it delivers each message to every
// other live peer over its link (GossipSub's mesh is not modelled hop by
// hop: one-hop delivery is its best case, and the byte count is what every
// peer must receive at least once).
type publisher struct {
	c    *Cluster
	from int
}

func (pb publisher) PublishDigest(d *cache.Digest) error {
	d = cloneDigest(d)
	size := d.EncodedSize()
	pb.c.broadcast(pb.from, size, func(to *peer) {
		pb.c.applyDigest(to, pb.from, d)
	})
	return nil
}

func (pb publisher) PublishLoad(l node.Load) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	from := pb.c.peers[pb.from].id
	pb.c.broadcast(pb.from, len(b), func(to *peer) {
		to.mesh.ApplyLoad(from, l, wall(pb.c.l.now))
	})
	return nil
}

// cloneDigest copies d's slices: the message is in flight while its source
// keeps working.
func cloneDigest(d *cache.Digest) *cache.Digest {
	c := *d
	c.Hashes = slices.Clone(d.Hashes)
	c.Added = slices.Clone(d.Added)
	c.Removed = slices.Clone(d.Removed)
	return &c
}
