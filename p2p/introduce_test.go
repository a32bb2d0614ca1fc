package p2p

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/cache"
)

// TestGossipIntroducesRelayedAuthors: the author of a message a connected
// member relays, which this host ignores as a stranger, is handed to
// GossipOptions.Introduce (so the host can dial it and hear it first-hand
// next time) — while the relay is within its quota only, and never for a
// member.
func TestGossipIntroducesRelayedAuthors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 0 victim V, 1 attacker M, 2 relay B, 3 far author A: V-M, V-B, B-A.
		_, hs := vnet(t, 4, [][2]int{{0, 1}, {0, 2}, {2, 3}})
		v, m, b, a := hs[0], hs[1], hs[2], hs[3]
		var mu sync.Mutex
		var asked []peer.ID
		opts := GossipOptions{NoScoring: true, MaxRelayedStrangers: 5}
		vopts := opts
		vopts.Introduce = func(p peer.ID) {
			mu.Lock()
			asked = append(asked, p)
			mu.Unlock()
		}
		startGossip(t, v, vopts)
		startGossip(t, b, opts)
		_, ta := startGossip(t, a, opts)
		evil := newRawPublisher(t, m)
		settle(3 * time.Second)

		if err := ta.PublishDigest(context.Background(), testDigest(a.ID(), cache.KindSnapshot, 1, 1, 5)); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		mu.Lock()
		got := slices.Clone(asked)
		mu.Unlock()
		if len(got) != 1 || got[0] != a.ID() {
			t.Fatalf("introduced %v, want A (%s), relayed by B", got, a.ID())
		}

		// M's own digest: a member, nothing to introduce. Then 20 made-up
		// identities: introduced only while M is within its quota of 5.
		evil.publish(mustMarshal(t, testDigest(m.ID(), cache.KindSnapshot, 1, 1, 7)))
		for i := range 20 {
			priv, id := newKey(t)
			evil.publishAs(priv, mustMarshal(t, testDigest(id, cache.KindSnapshot, 1, 1, cache.Hash(i+1))))
		}
		synctest.Wait()
		mu.Lock()
		got = slices.Clone(asked[1:])
		mu.Unlock()
		if len(got) != 5 || slices.Contains(got, m.ID()) {
			t.Fatalf("introduced %d authors relayed by M (%v), want the 5 within its quota", len(got), got)
		}
	})
}
