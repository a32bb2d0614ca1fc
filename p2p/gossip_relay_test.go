package p2p

import (
	"context"
	"crypto/rand"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/meshllm/meshllm/cache"
)

// vnet is a mocknet for tests in a synctest bubble: n hosts, linked as
// links says (nil: all), and connected along those links.
func vnet(t *testing.T, n int, links [][2]int) (mocknet.Mocknet, []host.Host) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	hs := make([]host.Host, n)
	for i := range hs {
		h, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	if links == nil {
		for i := range n {
			for j := i + 1; j < n; j++ {
				links = append(links, [2]int{i, j})
			}
		}
	}
	for _, l := range links {
		if _, err := mn.LinkPeers(hs[l[0]].ID(), hs[l[1]].ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := mn.ConnectPeers(hs[l[0]].ID(), hs[l[1]].ID()); err != nil {
			t.Fatal(err)
		}
	}
	return mn, hs
}

// settle lets the bubble run d of virtual time and then go idle.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// publishAs publishes b on the raw peer's topic signed by priv (a made-up
// identity), and lets the bubble settle so no queue overflows.
func (r *rawPublisher) publishAs(priv crypto.PrivKey, b []byte) {
	r.t.Helper()
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.topic.Publish(context.Background(), b, pubsub.WithSecretKeyAndPeerId(priv, id)); err != nil {
		r.t.Fatal(err)
	}
	synctest.Wait()
}

func newKey(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, id
}

// drain returns every message Next has ready (the bubble is idle).
func drain(t *testing.T, tp *Topic) []*Message {
	t.Helper()
	var out []*Message
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		m, err := tp.Next(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

// TestGossipIgnoresStrangers: a message is delivered only when its author
// is a connected topic member. Made-up identities published through a
// connected peer, a connected peer that never joined the topic, and an
// honest author two hops away are ignored (and not relayed on); the
// connected attacker's own messages still pass.
func TestGossipIgnoresStrangers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0 victim V, 1 attacker M, 2 bystander P (no pubsub), 3 relay B,
		// 4 far author A: V-M, V-P, V-B, M-P, B-A.
		mn, hs := vnet(t, 5, [][2]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {3, 4}})
		v, m, p, b, a := hs[0], hs[1], hs[2], hs[3], hs[4]
		opts := GossipOptions{NoScoring: true} // every message reaches the validator
		gv, tv := startGossip(t, v, opts)
		_, tb := startGossip(t, b, opts)
		_, ta := startGossip(t, a, opts)
		evil := newRawPublisher(t, m)
		settle(3 * time.Second) // subscriptions, mesh grafts
		if len(tv.Peers()) != 2 || len(tb.Peers()) != 2 {
			t.Fatalf("topic peers: V %v, B %v", tv.Peers(), tb.Peers())
		}

		const fakes = 20
		for i := range fakes {
			priv, id := newKey(t)
			evil.publishAs(priv, mustMarshal(t, testDigest(id, cache.KindSnapshot, 1, 1, cache.Hash(i+1))))
		}
		// P is connected to V but not in the topic; M holds P's key.
		evil.publishAs(p.Peerstore().PrivKey(p.ID()), mustMarshal(t, testDigest(p.ID(), cache.KindSnapshot, 1, 1, 99)))
		evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 1, 7)))
		synctest.Wait()
		got := drain(t, tv)
		if len(got) != 1 || got[0].From != m.ID() {
			t.Fatalf("V got %d messages (%v), want M's own only", len(got), got)
		}
		if st := gv.Stats(); st.Strangers != fakes+1 || st.Ignored != fakes+1 || st.Rejected != 0 {
			t.Fatalf("V's counters %+v, want %d strangers ignored", st, fakes+1)
		}

		// A is B's neighbour, not V's: B accepts and relays A's digest,
		// V ignores it as a stranger.
		if err := ta.PublishDigest(context.Background(), testDigest(a.ID(), cache.KindSnapshot, 1, 1, 5)); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		if msgs := drain(t, tb); len(msgs) != 1 || msgs[0].From != a.ID() {
			t.Fatalf("B got %v, want A's digest", msgs)
		}
		if msgs := drain(t, tv); len(msgs) != 0 {
			t.Fatalf("V got %v from an author it is not connected to", msgs)
		}
		if st := gv.Stats(); st.Strangers != fakes+2 {
			t.Fatalf("V's counters %+v: A's relayed digest did not reach the validator", st)
		}
		// Once V connects to A, A is a member: its next digest is heard.
		if _, err := mn.LinkPeers(v.ID(), a.ID()); err != nil {
			t.Fatal(err)
		}
		if err := v.Connect(context.Background(), peer.AddrInfo{ID: a.ID(), Addrs: a.Addrs()}); err != nil {
			t.Fatal(err)
		}
		settle(2 * time.Second)
		if err := ta.PublishDigest(context.Background(), testDigest(a.ID(), cache.KindSnapshot, 1, 2, 5, 6)); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		if msgs := drain(t, tv); len(msgs) != 1 || msgs[0].From != a.ID() {
			t.Fatalf("V got %v, want A's second digest once connected", msgs)
		}
	})
}

// TestGossipRelayQuota: a peer that forwards more distinct strangers than
// the quota in a window loses RelayPenalty from its score (graylisted:
// the rest of its flood goes unread), an honest peer keeps its score, and
// the penalty ends a window later.
func TestGossipRelayQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quota = 5
		_, hs := vnet(t, 3, nil)
		v, m, a := hs[0], hs[1], hs[2]
		var mu sync.Mutex
		scores := map[peer.ID]float64{}
		inspect := pubsub.WithPeerScoreInspect(func(s map[peer.ID]float64) {
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(scores, s)
		}, time.Second)
		score := func(p peer.ID) float64 {
			mu.Lock()
			defer mu.Unlock()
			return scores[p]
		}
		gv, tv := startGossip(t, v, GossipOptions{MaxRelayedStrangers: quota, PubSubOptions: []pubsub.Option{inspect}})
		_, ta := startGossip(t, a, GossipOptions{})
		evil := newRawPublisher(t, m)
		settle(3 * time.Second)

		for i := range 3 * quota {
			priv, id := newKey(t)
			evil.publishAs(priv, mustMarshal(t, testDigest(id, cache.KindSnapshot, 1, 1, cache.Hash(i+1))))
		}
		settle(2 * time.Second) // a score inspection
		if st := gv.Stats(); st.Strangers != quota+1 {
			t.Fatalf("%d strangers validated, want %d: the relay should be graylisted past its quota", st.Strangers, quota+1)
		}
		if !gv.relays.Throttled(m.ID()) || score(m.ID()) >= scoreThresholds().GraylistThreshold {
			t.Fatalf("M over quota: throttled %v, score %v", gv.relays.Throttled(m.ID()), score(m.ID()))
		}
		if err := ta.PublishDigest(context.Background(), testDigest(a.ID(), cache.KindSnapshot, 1, 1, 3)); err != nil {
			t.Fatal(err)
		}
		// M's own digest: V drops M's RPCs unread, but M is a connected
		// member, so the copy honest A relays is heard (the quota
		// penalizes relaying strangers, not being one identity).
		evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 1, 4)))
		settle(time.Second)
		msgs := drain(t, tv)
		if len(msgs) != 2 || score(a.ID()) < 0 {
			t.Fatalf("V got %d messages (A's score %v), want A's digest and M's through A", len(msgs), score(a.ID()))
		}
		for _, x := range msgs {
			if x.ReceivedFrom != a.ID() {
				t.Fatalf("V heard %s's digest from %s while M is graylisted; want it through A", x.From, x.ReceivedFrom)
			}
		}

		// A window later the penalty is gone and M is heard again.
		settle(DefaultRelayWindow + time.Second)
		if gv.relays.Throttled(m.ID()) || score(m.ID()) < 0 {
			t.Fatalf("M still penalized a window later: score %v", score(m.ID()))
		}
		evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 2, 4)))
		settle(time.Second)
		if msgs := drain(t, tv); len(msgs) != 1 || msgs[0].From != m.ID() {
			t.Fatalf("V got %v, want M's digest after the penalty", msgs)
		}
		// M's RPCs are read again: a stranger it sends reaches the
		// validator (A would not relay it).
		before := gv.Stats().Strangers
		priv, id := newKey(t)
		evil.publishAs(priv, mustMarshal(t, testDigest(id, cache.KindSnapshot, 1, 1, 1)))
		if got := gv.Stats().Strangers; got != before+1 {
			t.Fatalf("strangers %d -> %d: M's RPCs still unread", before, got)
		}
	})
}

// TestRelayQuotaBounds: the quota's state is bounded in relays and in
// authors per relay, and its window resets.
func TestRelayQuotaBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newRelayQuota(GossipOptions{MaxRelayedStrangers: 3, RelayWindow: time.Minute, RelayPenalty: 7, MaxAuthors: 4,
		Now: func() time.Time { return now }})
	relay, authors := mkPeerID(t, 1), make([]peer.ID, 10)
	for i := range authors {
		authors[i] = mkPeerID(t, byte(10+i))
	}
	for i := range 3 {
		if q.stranger(relay, authors[i]) {
			t.Fatalf("throttled at %d strangers, quota 3", i+1)
		}
	}
	if q.stranger(relay, authors[0]) || q.Score(relay) != 0 {
		t.Fatal("a repeated author counted twice")
	}
	if !q.stranger(relay, authors[3]) || q.Score(relay) != -7 {
		t.Fatalf("not throttled past the quota: score %v", q.Score(relay))
	}
	for _, a := range authors {
		q.stranger(relay, a)
	}
	if n := len(q.relays[relay].authors); n != 4 {
		t.Fatalf("%d authors kept for one relay, want quota+1 = 4", n)
	}
	now = now.Add(59 * time.Second)
	if !q.Throttled(relay) {
		t.Fatal("penalty ended early")
	}
	now = now.Add(time.Minute + time.Second) // a window after the last excess
	if q.Throttled(relay) {
		t.Fatal("penalty outlived its window")
	}
	if q.stranger(relay, authors[9]) || len(q.relays[relay].authors) != 1 {
		t.Fatal("the window did not start over")
	}
	for i := range 20 {
		q.stranger(mkPeerID(t, byte(100+i)), authors[0])
		now = now.Add(time.Millisecond)
	}
	if len(q.relays) > 4 {
		t.Fatalf("%d relays remembered, limit 4", len(q.relays))
	}
}
