package wire

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/p2p"
)

const floodModel = "flood-model"

// floodVictim is a peer wired the way `meshllm join` wires its gossip: a
// p2p.Gossip topic whose messages ReceiveGossip feeds into a node.Mesh.
type floodVictim struct {
	h      host.Host
	gossip *p2p.Gossip
	mesh   *node.Mesh
}

func startFloodVictim(t *testing.T, ctx context.Context, h host.Host) *floodVictim {
	t.Helper()
	// A deep buffer: the attack must reach the validator and the mesh,
	// not be lost because the reader fell behind.
	g, err := p2p.NewGossip(ctx, h, p2p.GossipOptions{BufferSize: 8192})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	topic, err := g.Join(floodModel)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := node.NewMesh(node.MeshConfig{Self: node.PeerID(h.ID().String()), Model: floodModel, Policy: node.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	go ReceiveGossip(ctx, topic, mesh)
	return &floodVictim{h: h, gossip: g, mesh: mesh}
}

// floodAttacker runs plain GossipSub (no meshllm validator) and publishes
// messages signed by keys it made up: each is a valid, strictly signed
// message whose author never connected to anyone.
type floodAttacker struct {
	t     *testing.T
	topic *pubsub.Topic
}

func startFloodAttacker(t *testing.T, ctx context.Context, h host.Host) *floodAttacker {
	t.Helper()
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ps.Join(p2p.TopicName(floodModel))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	return &floodAttacker{t: t, topic: tp}
}

// publishAs publishes a snapshot of n random hashes authored by a fresh
// identity (or by the attacker's own, when priv is nil), and waits for the
// bubble to settle so no queue along the way overflows.
func (a *floodAttacker) publishAs(priv crypto.PrivKey, self peer.ID, n int) peer.ID {
	a.t.Helper()
	author := self
	var opts []pubsub.PubOpt
	if priv != nil {
		id, err := peer.IDFromPrivateKey(priv)
		if err != nil {
			a.t.Fatal(err)
		}
		author = id
		opts = append(opts, pubsub.WithSecretKeyAndPeerId(priv, id))
	}
	d := &cache.Digest{Kind: cache.KindSnapshot, Peer: author.String(), Model: floodModel,
		BlockSize: cache.DefaultBlockSize, Epoch: 1, Seq: 1, Held: n, Hashes: randomHashes(n)}
	b, err := d.MarshalBinary()
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.topic.Publish(context.Background(), b, opts...); err != nil {
		a.t.Fatal(err)
	}
	synctest.Wait()
	return author
}

func randomHashes(n int) []cache.Hash {
	buf := make([]byte, 8*n)
	_, _ = rand.Read(buf)
	hs := make([]cache.Hash, n)
	for i := range hs {
		hs[i] = cache.Hash(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return hs
}

func freshKey(t testing.TB) crypto.PrivKey {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

// floodNet is a mocknet of a victim, an attacker and an honest peer, all
// connected, with their topic subscriptions exchanged.
func floodNet(t *testing.T, ctx context.Context) (v *floodVictim, evil *floodAttacker, evilID peer.ID, honest *p2p.Topic, honestID peer.ID) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	var hs []host.Host
	for range 3 {
		h, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	v = startFloodVictim(t, ctx, hs[0])
	evil = startFloodAttacker(t, ctx, hs[1])
	hg, err := p2p.NewGossip(ctx, hs[2], p2p.GossipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hg.Close() })
	if honest, err = hg.Join(floodModel); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // virtual: subscriptions and the first heartbeats
	synctest.Wait()
	return v, evil, hs[1].ID(), honest, hs[2].ID()
}

// TestSybilDigestFlood is the attack: one connected peer publishes, through
// its own connection, the digests of many identities it generated (each
// message validly signed by its made-up author), each listing many hashes.
// The victim's view must hold no replica of an author it is not connected
// to; past the relay quota the attacker is graylisted, so the rest of the
// flood (and its own digest after it) is dropped before the validator;
// the honest peer's replica is kept and still updated.
func TestSybilDigestFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const identities, hashes = 300, 256
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		v, evil, evilID, honest, honestID := floodNet(t, ctx)

		d := &cache.Digest{Kind: cache.KindSnapshot, Peer: honestID.String(), Model: floodModel,
			BlockSize: cache.DefaultBlockSize, Epoch: 1, Seq: 1, Held: 64, Hashes: randomHashes(64)}
		if err := honest.PublishDigest(ctx, d); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for range identities {
			evil.publishAs(freshKey(t), evilID, hashes)
		}
		evil.publishAs(nil, evilID, hashes) // the attacker's own digest
		d.Seq, d.Hashes, d.Held = 2, randomHashes(80), 80
		if err := honest.PublishDigest(ctx, d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()

		peers := v.mesh.Peers(time.Now())
		blocks := 0
		for _, p := range peers {
			blocks += p.DigestKnown
		}
		st := v.gossip.Stats()
		t.Logf("after %d fake identities x %d hashes: %d peers, %d blocks in the view; gossip %+v",
			identities, hashes, len(peers), blocks, st)
		if len(peers) != 1 || peers[0].Peer != node.PeerID(honestID.String()) {
			t.Fatalf("the view holds %d peers (%d blocks) after %d fake identities; want the honest peer only",
				len(peers), blocks, identities)
		}
		if peers[0].DigestKnown != 80 {
			t.Fatalf("the honest peer's replica has %d blocks, want its second digest's 80", peers[0].DigestKnown)
		}
		// Strangers reach the validator until the relay goes over its
		// quota; then its score graylists it and its RPCs go unread.
		if st.Strangers < p2p.DefaultMaxRelayedStrangers+1 || st.Strangers >= identities {
			t.Fatalf("%d strangers validated, want the quota's %d (+ a batch) and fewer than the %d sent",
				st.Strangers, p2p.DefaultMaxRelayedStrangers+1, identities)
		}
	})
}

// TestMeasureSybilHeap prints the victim's heap growth under the issue's
// figure, 2,000 fake identities x 2,000 hashes (~32 MB of gossip), through
// the whole receive path (validator, ReceiveGossip, Mesh):
//
//	MESHLLM_MEASURE=1 go test ./cmd/meshllm/wire -run TestMeasureSybilHeap -v -count=1
func TestMeasureSybilHeap(t *testing.T) {
	if os.Getenv("MESHLLM_MEASURE") == "" {
		t.Skip("set MESHLLM_MEASURE=1 to measure the heap under a Sybil digest flood")
	}
	synctest.Test(t, func(t *testing.T) {
		const identities, hashes = 2000, 2000
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		v, evil, evilID, _, _ := floodNet(t, ctx)
		keys := make([]crypto.PrivKey, identities)
		for i := range keys {
			keys[i] = freshKey(t)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, k := range keys {
			evil.publishAs(k, evilID, hashes)
		}
		// Virtual time: past GossipSub's message history (5 heartbeats),
		// so the attacker's own cache of what it sent (same process) is
		// not counted as the victim's.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		peers := v.mesh.Peers(time.Now())
		blocks := 0
		for _, p := range peers {
			blocks += p.DigestKnown
		}
		st := v.gossip.Stats()
		t.Logf("%d fake identities x %d hashes (%.1f MB of digests): heap %+.1f MiB, view %d peers / %d blocks, gossip in %d msgs, ignored %d, rejected %d",
			identities, hashes, float64(identities*hashes*8)/1e6,
			(float64(after.HeapAlloc)-float64(before.HeapAlloc))/(1<<20), len(peers), blocks, st.MessagesIn, st.Ignored, st.Rejected)
	})
}
