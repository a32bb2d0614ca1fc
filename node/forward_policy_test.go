package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node/forward"
	"github.com/prometheus/client_golang/prometheus"
)

// policyPeers builds the origin A, configured by cfg, forwarding to B and
// C (twins, each holding the request's 600-token prompt and advertised in
// A's mesh). It returns A, the request, and the peers A forwarded to, in
// order.
func policyPeers(t *testing.T, cfg func(*RouterConfig), peers ...PeerID) (a *testPeer, req infer.Request, tried func() []PeerID) {
	t.Helper()
	b := newTestPeer(t, "B", nil)
	var mu sync.Mutex
	var calls []PeerID
	fwd := forwardFunc(func(ctx context.Context, peer PeerID, req infer.Request, est int, emit func(infer.Piece) error) (*infer.Result, error) {
		mu.Lock()
		calls = append(calls, peer)
		mu.Unlock()
		return b.router.ServeForwarded(ctx, req, emit) // every peer is B's twin
	})
	eng := newSimEngine(t)
	mesh, err := NewMesh(MeshConfig{Self: "A", Model: eng.Info().ID, RTT: fixedRTT(time.Millisecond), Policy: DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	rc := RouterConfig{Engine: eng, Mesh: mesh, Forwarder: fwd, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.DiscardHandler), Recent: 8}
	cfg(&rc)
	r, err := NewRouter(rc)
	if err != nil {
		t.Fatal(err)
	}
	a = &testPeer{id: "A", eng: eng, router: r}
	req = infer.Request{Prompt: prompt(7, 600), Sampling: infer.Sampling{MaxTokens: 8}}
	if _, err := b.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		advertise(t, a, p, eng.Info().ID, req.Prompt)
	}
	return a, req, func() []PeerID {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// memberSet is a Members function admitting ids.
func memberSet(ids ...PeerID) func(PeerID) bool {
	return func(p PeerID) bool { return slices.Contains(ids, p) }
}

// TestForwardPolicyDecidesWherePromptsGo: with B holding the prompt, the
// request goes to B under "any", and stays local under "none", for a
// non-member under "members", and in an open mesh (no membership) under
// "members"; a request can narrow the peer's setting but never widen it.
func TestForwardPolicyDecidesWherePromptsGo(t *testing.T) {
	cases := []struct {
		name    string
		peer    forward.Policy
		members func(PeerID) bool
		request forward.Policy // on the context; Unset: none
		want    []PeerID       // peers forwarded to
		reason  Reason
		applied forward.Policy
	}{
		{"any", forward.Any, nil, forward.Unset, []PeerID{"B"}, ReasonForward, forward.Any},
		{"unset is any", forward.Unset, nil, forward.Unset, []PeerID{"B"}, ReasonForward, forward.Any},
		{"none", forward.None, memberSet("B"), forward.Unset, nil, ReasonForwardPolicy, forward.None},
		{"members, B a member", forward.Members, memberSet("B"), forward.Unset, []PeerID{"B"}, ReasonForward, forward.Members},
		{"members, B not a member", forward.Members, memberSet("C"), forward.Unset, nil, ReasonForwardPolicy, forward.Members},
		{"members in an open mesh", forward.Members, nil, forward.Unset, nil, ReasonForwardPolicy, forward.Members},
		{"request none on an any peer", forward.Any, nil, forward.None, nil, ReasonForwardPolicy, forward.None},
		{"request members on an any peer", forward.Any, memberSet("C"), forward.Members, nil, ReasonForwardPolicy, forward.Members},
		{"request any cannot widen members", forward.Members, memberSet("C"), forward.Any, nil, ReasonForwardPolicy, forward.Members},
		{"request any cannot widen none", forward.None, memberSet("B"), forward.Any, nil, ReasonForwardPolicy, forward.None},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, req, tried := policyPeers(t, func(rc *RouterConfig) { rc.Forward, rc.Members = c.peer, c.members }, "B")
				ctx := forward.WithPolicy(t.Context(), c.request)
				var col collect
				if _, err := a.router.Generate(ctx, req, col.emit); err != nil {
					t.Fatal(err)
				}
				if col.tokens() != 8 {
					t.Fatalf("client got %d tokens", col.tokens())
				}
				if got := tried(); !slices.Equal(got, c.want) {
					t.Fatalf("forwarded to %v, want %v", got, c.want)
				}
				rec := a.router.Recent()[0]
				if rec.Reason != c.reason || rec.Forward != c.applied {
					t.Fatalf("reason %s forward %s, want %s %s", rec.Reason, rec.Forward, c.reason, c.applied)
				}
				if local := a.eng.Stats().ServedTotal; (len(c.want) == 0) != (local == 1) {
					t.Fatalf("local engine served %d", local)
				}
			})
		})
	}
}

// TestForwardPolicyMembersSkipsStrangersInFallbacks: under "members" a
// stranger is never tried, not even as a fallback, while members are.
func TestForwardPolicyMembersSkipsStrangersInFallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, req, tried := policyPeers(t, func(rc *RouterConfig) {
			rc.Forward, rc.Members = forward.Members, memberSet("C", "E")
		}, "B", "C", "D", "E")
		var col collect
		if _, err := a.router.Generate(t.Context(), req, col.emit); err != nil {
			t.Fatal(err)
		}
		rec := a.router.Recent()[0]
		got := append([]PeerID{rec.Chosen}, rec.Fallbacks...)
		for _, p := range got {
			if p != "C" && p != "E" {
				t.Fatalf("decision names stranger %s: chosen %s fallbacks %v", p, rec.Chosen, rec.Fallbacks)
			}
		}
		if fmt.Sprint(tried()) != "[C]" {
			t.Fatalf("forwarded to %v, want [C]", tried())
		}
	})
}

// TestForwardPolicyStrangerGetsNoPrompt is the attack: a stranger
// advertising every prefix (and honest enough to keep its trust) receives
// every prompt of an open mesh's peer. Under "members" (it is no member)
// and "none" it receives none. The figures: `go test ./node -run
// TestForwardPolicyStrangerGetsNoPrompt -v`.
func TestForwardPolicyStrangerGetsNoPrompt(t *testing.T) {
	const n = 60
	for _, c := range []struct {
		policy forward.Policy
		want   int
	}{{forward.Any, n}, {forward.Members, 0}, {forward.None, 0}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, _, tried := policyPeers(t, func(rc *RouterConfig) {
					rc.Forward, rc.Members, rc.NoTrust = c.policy, memberSet("M"), true
				})
				prompts := make([][]int32, n)
				tree := cache.NewTree(n, 1<<16)
				for i := range prompts {
					prompts[i] = prompt(100+i, 600)
					tree.Set(cache.Handle(i), prompts[i], 1)
				}
				src, err := cache.NewSource(cache.SourceConfig{Peer: "S", Model: a.eng.Info().ID, Epoch: 1})
				if err != nil {
					t.Fatal(err)
				}
				d, _ := src.Update(tree)
				now := time.Now()
				if _, err := a.router.Mesh().ApplyDigest("S", d, now); err != nil {
					t.Fatal(err)
				}
				for i, p := range prompts {
					// A fresh load announcement each time, as the stranger's
					// announce loop would send.
					a.router.Mesh().ApplyLoad("S", Load{Slots: 4, PrefillTokPerSec: 1000, DecodeTokPerSec: 500, Seq: uint64(i + 1)}, time.Now())
					req := infer.Request{Prompt: p, Sampling: infer.Sampling{MaxTokens: 8}}
					if _, err := a.router.Generate(t.Context(), req, func(infer.Piece) error { return nil }); err != nil {
						t.Fatal(err)
					}
				}
				got := len(tried())
				t.Logf("forward %s: the stranger received %d of %d prompts", c.policy, got, n)
				if got != c.want {
					t.Fatalf("stranger received %d of %d prompts, want %d", got, n, c.want)
				}
			})
		})
	}
}
