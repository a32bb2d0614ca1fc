package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
)

// This file runs a mesh of honest peers with and without an adversary
// that advertises every prefix, over memBus in virtual time.

// liarID is the adversary's peer ID.
const liarID PeerID = "L"

// fullBloom returns a Bloom filter that answers yes to every hash: the
// digest form of "my cache holds every prefix".
func fullBloom(t *testing.T) *cache.Bloom {
	t.Helper()
	b := cache.NewBloom(1, 1)
	probe := func(i uint64) cache.Hash { return cache.Hash(i*0x9E3779B97F4A7C15 + 12345) }
	full := func() bool {
		for i := range uint64(512) {
			if !b.Has(probe(1 << 32 * (i + 1))) {
				return false
			}
		}
		return true
	}
	for i := uint64(1); !full(); i++ {
		if i > 1<<16 {
			t.Fatal("could not fill the Bloom filter")
		}
		b.Add(probe(i))
	}
	return b
}

// trustForwarder forwards over the bus, except to the liar, which serves
// every request without reusing any cache (its engine sees a prompt whose
// first token differs from every other request's), so each of its claims
// fails.
type trustForwarder struct {
	n    *memNode
	bus  *memBus
	mu   sync.Mutex
	salt int32
}

func (f *trustForwarder) Forward(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
	if peer != liarID {
		return f.n.Forward(ctx, peer, req, est, emit)
	}
	f.bus.mu.Lock()
	liar := f.bus.nodes[liarID]
	f.bus.mu.Unlock()
	f.mu.Lock()
	f.salt++
	salt := 3 + f.salt%500
	f.mu.Unlock()
	cold := req
	cold.Prompt = append([]int32{salt, salt}, req.Prompt[2:]...)
	return liar.router.ServeForwarded(ctx, cold, emit)
}

// addTrustNode is memBus.add with a trustForwarder.
func addTrustNode(t *testing.T, b *memBus, id PeerID) *memNode {
	t.Helper()
	return b.addWith(t, id, func(n *memNode) Forwarder { return &trustForwarder{n: n, bus: b} })
}

// lie publishes, every second until ctx ends, a snapshot claiming every
// prefix and an idle load with speedup times the honest peers' speeds, to
// every other peer of the bus.
func lie(ctx context.Context, t *testing.T, b *memBus, model string, speedup float64) {
	bloom := fullBloom(t)
	for seq := uint64(1); ; seq++ {
		d := &cache.Digest{Kind: cache.KindSnapshot, Peer: string(liarID), Model: model,
			BlockSize: cache.DefaultBlockSize, Epoch: 1, Seq: seq, Held: 1 << 16, Filter: bloom}
		for _, o := range b.others(liarID) {
			if _, err := o.router.Mesh().ApplyDigest(liarID, d, time.Now()); err != nil {
				t.Error(err)
				return
			}
			o.router.Mesh().ApplyLoad(liarID, Load{Slots: 4, PrefillTokPerSec: 1000 * speedup, DecodeTokPerSec: 500 * speedup, Seq: seq}, time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// meshRun is what one run of the workload measured.
type meshRun struct {
	mean       time.Duration
	toLiar     map[PeerID]int // forwards to the liar, by origin
	lateToLiar int            // of those, in the second half of the run
	failed     int
	trust      map[PeerID]map[PeerID]TrustStatus // origin -> peer -> trust
}

// runTrustMesh runs the workload on honest peers A, B and C, plus the
// liar when liarSpeedup > 0 (claiming that many times the honest speeds):
// requests 3 s apart (virtual time), round robin over
// the origins, each a 560-token prefix of one of six subjects (subject i
// mod 6, visited in a scrambled order) plus a unique 40-token question.
func runTrustMesh(t *testing.T, liarSpeedup float64, requests int) meshRun {
	var out meshRun
	synctest.Test(t, func(t *testing.T) {
		bus := &memBus{nodes: map[PeerID]*memNode{}}
		honest := []*memNode{addTrustNode(t, bus, "A"), addTrustNode(t, bus, "B"), addTrustNode(t, bus, "C")}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, n := range honest {
			wg.Go(func() { n.ann.Run(ctx) })
		}
		if liarSpeedup > 0 {
			addTrustNode(t, bus, liarID) // serves, never announces honestly
			wg.Go(func() { lie(ctx, t, bus, honest[0].eng.Info().ID, liarSpeedup) })
		}
		defer func() { cancel(); wg.Wait() }()
		time.Sleep(1500 * time.Millisecond) // first announcements
		synctest.Wait()

		var total time.Duration
		for i := range requests {
			origin := honest[i%3]
			subject := (i * 5 / 3) % 6
			req := infer.Request{
				Prompt:   append(prompt(1000+subject, 560), prompt(5000+i, 40)...),
				Sampling: infer.Sampling{MaxTokens: 8},
			}
			start := time.Now()
			if _, err := origin.router.Generate(ctx, req, func(infer.Piece) error { return nil }); err != nil {
				out.failed++
			}
			total += time.Since(start)
			time.Sleep(3 * time.Second)
			synctest.Wait()
		}
		out.mean = total / time.Duration(requests)
		out.toLiar = map[PeerID]int{}
		out.trust = map[PeerID]map[PeerID]TrustStatus{}
		now := time.Now()
		for _, n := range honest {
			recs := n.router.Recent()
			for j, r := range recs {
				for _, a := range r.Attempts {
					if a.Peer == liarID {
						out.toLiar[n.id]++
						if j >= len(recs)/2 {
							out.lateToLiar++
						}
					}
				}
			}
			out.trust[n.id] = map[PeerID]TrustStatus{}
			for _, s := range n.router.Trust().Peers(now) {
				out.trust[n.id][s.Peer] = s
			}
		}
	})
	return out
}

// TestTrustAdversaryAdvertisingEveryPrefix: a peer whose digests claim
// every prefix (a full Bloom filter) and whose load says idle attracts
// requests until its results expose it; it serves them, but from a cold
// cache. Two liars: one that advertises honest speeds, and one that also
// claims 100x the honest speeds, so that even its trust-scaled claims keep
// winning until it is excluded.
//
// Bound, per origin: at most 3 forwards (three failed claims take trust
// from 1 to 0.125, below ExcludeBelow 0.2); once excluded, recovery (half-
// life 30 minutes) readmits it only after ~4 minutes, longer than this
// 3-minute run. Every claim it makes is judged failed; honest peers keep
// their trust above GossipBelow. The mesh's mean latency stays within 2x
// of the run without the liar: each lie costs one cold prefill on the liar
// instead of a warm one on the holder, at most 9 of them in 60 requests
// (measured x1.25 for the first liar, x1.7 for the second).
func TestTrustAdversaryAdvertisingEveryPrefix(t *testing.T) {
	const requests = 60 // 3 s apart: a 3-minute run
	base := runTrustMesh(t, 0, requests)
	for _, speedup := range []float64{1, 100} {
		t.Run(fmt.Sprintf("speedup=%v", speedup), func(t *testing.T) {
			adv := runTrustMesh(t, speedup, requests)
			t.Logf("mean latency: %v without the liar, %v with it (x%.2f); forwards to the liar by origin %v",
				base.mean, adv.mean, float64(adv.mean)/float64(base.mean), adv.toLiar)
			if base.failed != 0 || adv.failed != 0 {
				t.Fatalf("failed requests: %d without, %d with the liar", base.failed, adv.failed)
			}
			total := 0
			for origin, n := range adv.toLiar {
				total += n
				if n > 3 {
					t.Errorf("origin %s forwarded to the liar %d times, bound 3", origin, n)
				}
				if st := adv.trust[origin][liarID]; st.Claims != int64(n) || st.Failed != st.Claims {
					t.Errorf("origin %s judged the liar %+v after %d forwards: every claim should fail", origin, st, n)
				}
				for peer, st := range adv.trust[origin] {
					if peer != liarID && st.Trust < DefaultTrustConfig().GossipBelow {
						t.Errorf("origin %s distrusts honest peer %s: %+v", origin, peer, st)
					}
				}
			}
			if adv.lateToLiar != 0 {
				t.Errorf("%d forwards to the liar in the second half of the run", adv.lateToLiar)
			}
			if total == 0 {
				t.Fatal("the liar never attracted a request: the test shows nothing")
			}
			if float64(adv.mean) > 2*float64(base.mean) {
				t.Fatalf("mean latency %v with the liar, %v without: more than 2x", adv.mean, base.mean)
			}
		})
	}
}
