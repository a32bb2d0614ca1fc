package p2p

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/meshllm/meshllm/cache"
)

const testModel = "stories260K-3f2a"

func testDigest(author peer.ID, kind cache.Kind, epoch, seq uint64, hashes ...cache.Hash) *cache.Digest {
	d := &cache.Digest{Kind: kind, Peer: author.String(), Model: testModel, BlockSize: 16, Epoch: epoch, Seq: seq}
	if kind == cache.KindSnapshot {
		d.Hashes, d.Held = hashes, len(hashes)
	} else {
		d.Added = hashes
	}
	return d
}

func startGossip(t *testing.T, h host.Host, opts GossipOptions) (*Gossip, *Topic) {
	t.Helper()
	g, err := NewGossip(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	tp, err := g.Join(testModel)
	if err != nil {
		t.Fatal(err)
	}
	return g, tp
}

func nextMsg(t *testing.T, tp *Topic) *Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := tp.Next(ctx)
	if err != nil {
		t.Fatalf("no message on %s: %v", tp.Model(), err)
	}
	return m
}

// rawPublisher is a peer running plain GossipSub without meshllm's
// validator: it can publish anything, signed with its own key.
type rawPublisher struct {
	t     *testing.T
	topic *pubsub.Topic
}

func newRawPublisher(t *testing.T, h host.Host) *rawPublisher {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := ps.Join(TopicName(testModel))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Cancel)
	return &rawPublisher{t: t, topic: tp}
}

func (r *rawPublisher) publish(b []byte) {
	r.t.Helper()
	if err := r.topic.Publish(context.Background(), b); err != nil {
		r.t.Fatal(err)
	}
}

func mustMarshal(t *testing.T, d *cache.Digest) []byte {
	t.Helper()
	b, err := d.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGossipDeliversAndValidates(t *testing.T) {
	hs := mockHosts(t, 4)
	a, b, c, m := hs[0], hs[1], hs[2], hs[3]
	// Scoring would graylist M after three invalid messages and drop the
	// rest unread (TestGossipScoringGraylistsForger); here every message
	// must reach the validator.
	opts := GossipOptions{MaxMessageBytes: 4096, NoScoring: true}
	ga, ta := startGossip(t, a, opts)
	gb, tb := startGossip(t, b, opts)
	gc, tc := startGossip(t, c, opts)
	evil := newRawPublisher(t, m)
	for _, tp := range []*Topic{ta, tb, tc} {
		pollUntil(t, 10*time.Second, "topic peers", func() bool { return len(tp.Peers()) == 3 })
	}
	pollUntil(t, 10*time.Second, "raw peer's topic peers", func() bool { return len(evil.topic.ListPeers()) == 3 })

	// A digest and a load from honest peers reach the others, typed and
	// attributed to their signer.
	snap := testDigest(a.ID(), cache.KindSnapshot, 7, 3, 11, 22, 33)
	if err := ta.PublishDigest(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*Topic{tb, tc} {
		msg := nextMsg(t, tp)
		if msg.From != a.ID() || msg.Digest == nil || !reflect.DeepEqual(msg.Digest, snap) {
			t.Fatalf("got %+v, want A's snapshot", msg)
		}
	}
	load := &Load{Epoch: 1, Seq: 1, QueueDepth: 5, Slots: 4, PushBack: true, PrefillTokPerSec: 900}
	if err := tb.PublishLoad(context.Background(), load); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*Topic{ta, tc} {
		msg := nextMsg(t, tp)
		if msg.From != b.ID() || msg.Load == nil || msg.Load.Peer != b.ID() || !msg.Load.PushBack || msg.Load.QueueDepth != 5 {
			t.Fatalf("got %+v, want B's load", msg)
		}
	}

	// Forged: M signs a digest that names A. Rejected everywhere.
	evil.publish(mustMarshal(t, testDigest(a.ID(), cache.KindSnapshot, 99, 1, 44)))
	pollUntil(t, 10*time.Second, "the forged digest to be rejected", func() bool {
		return ga.Stats().Rejected >= 1 && gb.Stats().Rejected >= 1 && gc.Stats().Rejected >= 1
	})
	// Malformed and oversize messages are rejected too.
	rej := gc.Stats().Rejected
	evil.publish([]byte("md not a digest"))
	evil.publish([]byte("hello"))
	big := make([]cache.Hash, 600) // 4.8 KB > the 4 KiB limit
	for i := range big {
		big[i] = cache.Hash(i + 1)
	}
	evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 1, big...)))
	pollUntil(t, 10*time.Second, "garbage and oversize to be rejected", func() bool { return gc.Stats().Rejected >= rej+3 })

	// M's own valid messages still pass: what C gets next is this one, so
	// none of the rejected ones was delivered.
	own := testDigest(m.ID(), cache.KindSnapshot, 1, 2, 55)
	evil.publish(mustMarshal(t, own))
	if msg := nextMsg(t, tc); msg.From != m.ID() || !reflect.DeepEqual(msg.Digest, own) {
		t.Fatalf("got %+v, want M's own digest", msg)
	}

	// Replays and stale sequence numbers are ignored.
	l5 := (&Load{Peer: m.ID(), Epoch: 1, Seq: 5}).AppendBinary(nil)
	evil.publish(l5)
	if msg := nextMsg(t, tc); msg.Load == nil || msg.Load.Seq != 5 {
		t.Fatalf("got %+v, want load seq 5", msg)
	}
	ign := gc.Stats().Ignored
	evil.publish(l5) // the same bytes again (a new pubsub message)
	evil.publish((&Load{Peer: m.ID(), Epoch: 1, Seq: 3}).AppendBinary(nil))
	evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 1, 55))) // older snapshot
	evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 0, 9, 55))) // older epoch
	pollUntil(t, 10*time.Second, "stale messages to be ignored", func() bool { return gc.Stats().Ignored >= ign+4 })
	evil.publish((&Load{Peer: m.ID(), Epoch: 1, Seq: 6}).AppendBinary(nil))
	if msg := nextMsg(t, tc); msg.Load == nil || msg.Load.Seq != 6 {
		t.Fatalf("got %+v, want load seq 6", msg)
	}

	st := gc.Stats()
	if st.MessagesIn != 5 || st.Rejected != 4 || st.Ignored != 4 || st.BytesIn == 0 || gb.Stats().MessagesOut != 1 || gb.Stats().BytesOut == 0 {
		t.Fatalf("counters: C %+v, B %+v", st, gb.Stats())
	}
}

func TestGossipPublishRefusesOthersIdentity(t *testing.T) {
	hs := mockHosts(t, 2)
	_, ta := startGossip(t, hs[0], GossipOptions{})
	if err := ta.PublishDigest(context.Background(), testDigest(hs[1].ID(), cache.KindDelta, 1, 1, 5)); !errors.Is(err, ErrForged) {
		t.Fatalf("published a digest naming another peer: %v", err)
	}
	d := testDigest(hs[0].ID(), cache.KindDelta, 1, 1, 5)
	d.Model = "other"
	if err := ta.PublishDigest(context.Background(), d); !errors.Is(err, ErrForged) {
		t.Fatalf("published another model's digest: %v", err)
	}
	if err := ta.PublishLoad(context.Background(), &Load{Peer: hs[1].ID()}); !errors.Is(err, ErrForged) {
		t.Fatalf("published a load naming another peer: %v", err)
	}
	g2, err := NewGossip(context.Background(), hs[1], GossipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	t2, err := g2.Join(testModel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Join(testModel); err == nil {
		t.Fatal("joined the same model twice")
	}
	if err := t2.Close(); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if _, err := t2.Next(context.Background()); err == nil {
		t.Fatal("Next after Close returned a message")
	}
	if _, err := g2.Join(testModel); err != nil {
		t.Fatalf("join after leave: %v", err)
	}
}

func TestFreshness(t *testing.T) {
	a := mkPeerID(t, 1)
	seq := func(n uint64) []byte { return []byte{0, 0, 0, 0, 0, 0, byte(n >> 8), byte(n)} }
	f := newFreshness(2)
	d := func(kind cache.Kind, epoch, s uint64) *cache.Digest { return testDigest(a, kind, epoch, s) }
	steps := []struct {
		name  string
		seqno uint64
		dg    *cache.Digest
		want  bool
	}{
		{"first snapshot", 100, d(cache.KindSnapshot, 5, 10), true},
		{"delta after it", 101, d(cache.KindDelta, 5, 11), true},
		{"same pubsub seqno again", 101, d(cache.KindDelta, 5, 12), false},
		{"out of order within window", 99, d(cache.KindDelta, 5, 12), true},
		{"out of order twice", 99, d(cache.KindDelta, 5, 12), false},
		{"delta covered by snapshot", 102, d(cache.KindDelta, 5, 10), false},
		{"snapshot repeating the state", 103, d(cache.KindSnapshot, 5, 10), true},
		{"older snapshot", 104, d(cache.KindSnapshot, 5, 9), false},
		{"older epoch", 105, d(cache.KindSnapshot, 4, 50), false},
		{"newer epoch starts over", 106, d(cache.KindDelta, 6, 1), true},
		{"seqno far below the window", 106 - replayWindow - 1, d(cache.KindDelta, 6, 2), false},
		{"delta far behind the newest", 300, d(cache.KindDelta, 6, 100), true},
		{"delta more than MaxPending behind", 301, d(cache.KindDelta, 6, 100-cache.MaxPending-1), false},
	}
	for _, s := range steps {
		if got := f.digest(a, seq(s.seqno), s.dg); got != s.want {
			t.Fatalf("%s: fresh=%v, want %v", s.name, got, s.want)
		}
	}
	// Loads: strictly newer (epoch, seq) only.
	for i, s := range []struct {
		epoch, seq uint64
		want       bool
	}{{1, 1, true}, {1, 1, false}, {1, 0, false}, {1, 2, true}, {2, 0, true}, {1, 9, false}} {
		if got := f.load(a, nil, &Load{Peer: a, Epoch: s.epoch, Seq: s.seq}); got != s.want {
			t.Fatalf("load %d (%d,%d): fresh=%v, want %v", i, s.epoch, s.seq, got, s.want)
		}
	}
	// Bounded: a third author evicts the least recently heard from.
	b, c := mkPeerID(t, 2), mkPeerID(t, 3)
	f.load(b, nil, &Load{Peer: b, Seq: 1})
	f.load(c, nil, &Load{Peer: c, Seq: 1})
	if len(f.authors) != 2 {
		t.Fatalf("%d authors remembered, limit 2", len(f.authors))
	}
	if _, ok := f.authors[a]; ok {
		t.Fatal("the least recent author was kept")
	}
}

// With scoring on, a peer that keeps sending invalid messages falls below
// the graylist threshold at its neighbours, while honest peers do not.
func TestGossipScoringGraylistsForger(t *testing.T) {
	hs := mockHosts(t, 3)
	a, c, m := hs[0], hs[1], hs[2]
	var mu sync.Mutex
	scores := map[peer.ID]float64{}
	inspect := pubsub.WithPeerScoreInspect(func(s map[peer.ID]float64) {
		mu.Lock()
		defer mu.Unlock()
		maps.Copy(scores, s)
	}, 20*time.Millisecond)
	score := func(p peer.ID) (float64, bool) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := scores[p]
		return s, ok
	}
	_, ta := startGossip(t, a, GossipOptions{})
	gc, tc := startGossip(t, c, GossipOptions{PubSubOptions: []pubsub.Option{inspect}})
	evil := newRawPublisher(t, m)
	pollUntil(t, 10*time.Second, "topic peers", func() bool {
		return len(tc.Peers()) == 2 && len(ta.Peers()) == 2 && len(evil.topic.ListPeers()) == 2
	})
	if err := ta.PublishDigest(context.Background(), testDigest(a.ID(), cache.KindSnapshot, 1, 1, 7)); err != nil {
		t.Fatal(err)
	}
	nextMsg(t, tc)
	for i := range 3 {
		evil.publish(mustMarshal(t, testDigest(a.ID(), cache.KindSnapshot, 2, uint64(i), 8)))
	}
	pollUntil(t, 10*time.Second, "M's score to fall below the graylist threshold", func() bool {
		s, ok := score(m.ID())
		return ok && s < scoreThresholds().GraylistThreshold
	})
	if s, _ := score(a.ID()); s < 0 {
		t.Fatalf("honest A's score is %v", s)
	}
	if gc.Stats().Rejected != 3 {
		t.Fatalf("rejected %d, want 3", gc.Stats().Rejected)
	}
}

func TestScoreParamsValid(t *testing.T) {
	hs := mockHosts(t, 1)
	// NewGossip validates peer and threshold parameters, Join the topic's.
	startGossip(t, hs[0], GossipOptions{})
}
