package node

import (
	"slices"
	"testing"
	"time"
)

// The figures below follow the paper's setting: a 600-token MMLU 5-shot
// prompt, a one-token answer, peers with a fast engine (5,000 prefill tok/s,
// 200 decode tok/s), so that prefilling the whole prompt costs 120 ms and a
// cache holder saves about 112 ms of it.
const (
	tPrompt  = 600
	tHeld    = 560 // the cache holder's whole-block match
	tPrefill = 5000.0
	tDecode  = 200.0
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fastLocal() LocalView {
	return LocalView{Slots: 4, PrefillTokPerSec: tPrefill, DecodeTokPerSec: tDecode}
}

func holder(id string, rtt time.Duration) PeerView {
	return PeerView{ID: PeerID(id), EstimatedCached: tHeld, EstimateAge: time.Second,
		RTT: rtt, RTTKnown: true, Slots: 4, PrefillTokPerSec: tPrefill, DecodeTokPerSec: tDecode,
		LoadAge: time.Second}
}

func with(p PeerView, f func(*PeerView)) PeerView { f(&p); return p }

func TestDecide(t *testing.T) {
	route := Route{PromptTokens: tPrompt, MaxTokens: 1}
	cold := func(id string, rtt time.Duration) PeerView {
		return with(holder(id, rtt), func(p *PeerView) { p.EstimatedCached = 0 })
	}
	cases := []struct {
		name      string
		route     Route
		local     LocalView
		peers     []PeerView
		policy    func(*Policy)
		wantLocal bool
		wantPeer  PeerID
		wantFall  []PeerID
		reason    Reason
		estCached int // checked when >= 0
	}{
		{name: "no peers", route: route, local: fastLocal(), wantLocal: true, reason: ReasonNoPeers, estCached: 0},
		{name: "2ms link: forward to the cache holder", route: route, local: fastLocal(),
			peers: []PeerView{holder("B", 2*time.Millisecond)}, wantPeer: "B", reason: ReasonForward, estCached: tHeld},
		{name: "200ms link: refuse (the paper's losing case)", route: route, local: fastLocal(),
			peers: []PeerView{holder("B", 200*time.Millisecond)}, wantLocal: true, reason: ReasonRefusedRTT, estCached: 0},
		{name: "1000ms link: refuse", route: route, local: fastLocal(),
			peers: []PeerView{holder("B", time.Second)}, wantLocal: true, reason: ReasonRefusedRTT, estCached: 0},
		{name: "local holds the prefix too: stay", route: route,
			local: with2(fastLocal(), func(l *LocalView) { l.Cached = tHeld }),
			peers: []PeerView{holder("B", 2*time.Millisecond)}, wantLocal: true, reason: ReasonLocal, estCached: tHeld},
		{name: "fast GPU peer wins a cold prompt", route: Route{PromptTokens: tPrompt, MaxTokens: 16},
			local: LocalView{Slots: 4, PrefillTokPerSec: 100, DecodeTokPerSec: 8},
			peers: []PeerView{with(cold("GPU", 20*time.Millisecond), func(p *PeerView) {
				p.PrefillTokPerSec, p.DecodeTokPerSec = 10000, 200
			})}, wantPeer: "GPU", reason: ReasonForward, estCached: 0},
		{name: "unmeasured local speed: assumed CPU speed, GPU peer wins", route: Route{PromptTokens: tPrompt, MaxTokens: 16},
			local: LocalView{Slots: 4},
			peers: []PeerView{with(cold("GPU", 20*time.Millisecond), func(p *PeerView) {
				p.PrefillTokPerSec, p.DecodeTokPerSec = 10000, 200
			})}, wantPeer: "GPU", reason: ReasonForward},
		{name: "equal cold peer: stay", route: route, local: fastLocal(),
			peers: []PeerView{cold("B", time.Millisecond)}, wantLocal: true, reason: ReasonLocal},
		{name: "push-back skipped", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.PushBack = true })},
			wantLocal: true, reason: ReasonPushBack},
		{name: "push-back skipped, next holder taken", route: route, local: fastLocal(),
			peers: []PeerView{
				with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.PushBack = true }),
				holder("C", 3*time.Millisecond),
			}, wantPeer: "C", reason: ReasonForward},
		{name: "cooldown skipped", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.CooldownUntil = t0.Add(time.Second) })},
			wantLocal: true, reason: ReasonPushBack},
		{name: "cooldown over", route: route, local: fastLocal(),
			peers: []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) {
				p.CooldownUntil = t0
				p.Failures = 3
			})},
			wantPeer: "B", reason: ReasonForward},
		{name: "stale estimate discounted by half", route: route, local: fastLocal(),
			peers:    []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.EstimateAge = 45 * time.Second })},
			wantPeer: "B", reason: ReasonForward, estCached: tHeld / 2},
		{name: "estimate past the horizon is worthless", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.EstimateAge = 80 * time.Second })},
			wantLocal: true, reason: ReasonLocal},
		{name: "gap discounts from the grace age on", route: route, local: fastLocal(),
			peers: []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) {
				p.Gap = true
				p.EstimateAge = 0
			})},
			wantPeer: "B", reason: ReasonForward, estCached: tHeld},
		{name: "unknown RTT excluded", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 0), func(p *PeerView) { p.RTTKnown = false })},
			wantLocal: true, reason: ReasonRefusedRTT},
		{name: "unknown RTT with a stand-in", route: route, local: fastLocal(),
			peers:  []PeerView{with(holder("B", 0), func(p *PeerView) { p.RTTKnown = false })},
			policy: func(p *Policy) { p.UnknownRTT = 5 * time.Millisecond }, wantPeer: "B", reason: ReasonForward},
		{name: "no load heard", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.Slots = 0 })},
			wantLocal: true, reason: ReasonNoPeers},
		{name: "load expired", route: route, local: fastLocal(),
			peers:     []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) { p.LoadAge = 11 * time.Second })},
			wantLocal: true, reason: ReasonNoPeers},
		{name: "fallbacks ordered, losers dropped", route: route, local: fastLocal(),
			peers: []PeerView{
				cold("D", time.Millisecond),
				with(holder("C", 2*time.Millisecond), func(p *PeerView) { p.EstimatedCached = 400 }),
				holder("B", 2*time.Millisecond),
				with(holder("E", 2*time.Millisecond), func(p *PeerView) { p.EstimatedCached = 480 }),
			}, wantPeer: "B", wantFall: []PeerID{"E", "C"}, reason: ReasonForward},
		{name: "fallbacks capped", route: route, local: fastLocal(),
			peers:  []PeerView{holder("B", 2*time.Millisecond), holder("C", 3*time.Millisecond), holder("D", 4*time.Millisecond)},
			policy: func(p *Policy) { p.MaxFallbacks = 1 }, wantPeer: "B", wantFall: []PeerID{"C"}, reason: ReasonForward},
		{name: "ties broken by failures then ID", route: route, local: fastLocal(),
			peers: []PeerView{
				with(holder("A", 2*time.Millisecond), func(p *PeerView) { p.Failures = 1 }),
				holder("C", 2*time.Millisecond), holder("B", 2*time.Millisecond),
			}, wantPeer: "B", wantFall: []PeerID{"C", "A"}, reason: ReasonForward},
		{name: "deep queue at the holder keeps it local", route: route,
			local: LocalView{Slots: 4, PrefillTokPerSec: 100, DecodeTokPerSec: 8},
			peers: []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) {
				p.PrefillTokPerSec, p.DecodeTokPerSec = 100, 8
				p.Active, p.QueueDepth = 4, 50
			})}, wantLocal: true, reason: ReasonLocal},
		{name: "moderate queue at the holder still wins", route: route,
			local: LocalView{Slots: 4, PrefillTokPerSec: 100, DecodeTokPerSec: 8},
			peers: []PeerView{with(holder("B", 2*time.Millisecond), func(p *PeerView) {
				p.PrefillTokPerSec, p.DecodeTokPerSec = 100, 8
				p.Active, p.QueueDepth = 4, 20
			})}, wantPeer: "B", reason: ReasonForward},
		{name: "local queue pushes work out", route: route,
			local: with2(fastLocal(), func(l *LocalView) { l.Active, l.QueueDepth, l.Cached = 4, 12, tHeld }),
			peers: []PeerView{holder("B", 2*time.Millisecond)}, wantPeer: "B", reason: ReasonForward},
		{name: "absolute margin", route: route, local: fastLocal(),
			peers:  []PeerView{holder("B", 2*time.Millisecond)},
			policy: func(p *Policy) { p.MinSaving = 200 * time.Millisecond }, wantLocal: true, reason: ReasonLocal},
		{name: "relative margin", route: route, local: fastLocal(),
			peers:  []PeerView{holder("B", 2*time.Millisecond)},
			policy: func(p *Policy) { p.MinSavingFraction = 0.9 }, wantLocal: true, reason: ReasonLocal},
		{name: "estimate clamped to the prompt", route: Route{PromptTokens: 100, MaxTokens: 1}, local: fastLocal(),
			peers: []PeerView{holder("B", 2*time.Millisecond)}, wantLocal: true, reason: ReasonLocal, estCached: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultPolicy()
			if c.policy != nil {
				c.policy(&p)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			d := Decide(c.route, View{Now: t0, Local: c.local, Peers: c.peers}, p)
			t.Logf("%v", d)
			if d.Local != c.wantLocal || d.Peer != c.wantPeer || d.Reason != c.reason {
				t.Fatalf("got local=%v peer=%q reason=%s, want local=%v peer=%q reason=%s",
					d.Local, d.Peer, d.Reason, c.wantLocal, c.wantPeer, c.reason)
			}
			if c.wantFall != nil && !slices.Equal(d.Fallbacks, c.wantFall) {
				t.Fatalf("fallbacks %v, want %v", d.Fallbacks, c.wantFall)
			}
			if c.wantFall == nil && len(d.Fallbacks) > 0 && c.name != "push-back skipped, next holder taken" {
				t.Fatalf("unexpected fallbacks %v", d.Fallbacks)
			}
			if c.estCached > 0 && d.EstimatedCached != c.estCached {
				t.Fatalf("estimated cached %d, want %d", d.EstimatedCached, c.estCached)
			}
			if !d.Local && (d.PeerCost >= d.LocalCost || len(d.Candidates) != 1+len(d.Fallbacks)) {
				t.Fatalf("forwarded with peer cost %v >= local %v or candidates %v", d.PeerCost, d.LocalCost, d.Candidates)
			}
		})
	}
}

func with2(l LocalView, f func(*LocalView)) LocalView { f(&l); return l }

// TestDecideNeverWorseThanLocal checks the guarantee the design asks for:
// whatever the link, a forwarded request's expected completion is below
// local's by at least the margin, so routing is never expected to lose.
func TestDecideNeverWorseThanLocal(t *testing.T) {
	p := DefaultPolicy()
	for _, rtt := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
		200 * time.Millisecond, time.Second, 5 * time.Second} {
		for _, held := range []int{0, 16, 160, 592} {
			for _, q := range []int{0, 3, 30} {
				pv := holder("B", rtt)
				pv.EstimatedCached, pv.QueueDepth, pv.Active = held, q, 4
				d := Decide(Route{PromptTokens: tPrompt, MaxTokens: 1}, View{Now: t0, Local: fastLocal(), Peers: []PeerView{pv}}, p)
				if d.Local {
					continue
				}
				if saving := d.LocalCost - d.PeerCost; saving <= p.MinSaving {
					t.Fatalf("rtt %v held %d queue %d: forwarded with saving %v", rtt, held, q, saving)
				}
			}
		}
	}
}

func TestDecideRelayCostsMore(t *testing.T) {
	p := DefaultPolicy()
	v := View{Now: t0, Local: fastLocal(), Peers: []PeerView{holder("B", 2*time.Millisecond)}}
	direct := Decide(Route{PromptTokens: tPrompt, MaxTokens: 1}, v, p)
	v.Peers[0].Relayed = true
	relayed := Decide(Route{PromptTokens: tPrompt, MaxTokens: 1}, v, p)
	if relayed.PeerCost <= direct.PeerCost {
		t.Fatalf("relayed cost %v <= direct %v", relayed.PeerCost, direct.PeerCost)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []Policy{DefaultPolicy(), WANPolicy()} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	bad := DefaultPolicy()
	bad.MinSavingFraction = 1
	if bad.Validate() == nil {
		t.Fatal("MinSavingFraction 1 accepted")
	}
	p := DefaultPolicy()
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := p.failureCooldown(i + 1); got != w {
			t.Fatalf("failureCooldown(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := p.failureCooldown(100); got != p.MaxFailureCooldown {
		t.Fatalf("failureCooldown(100) = %v", got)
	}
}

func BenchmarkDecide(b *testing.B) {
	p := DefaultPolicy()
	peers := make([]PeerView, 32)
	for i := range peers {
		peers[i] = holder(string(rune('A'+i)), time.Duration(i+1)*time.Millisecond)
		peers[i].EstimatedCached = (i * 16) % tPrompt
	}
	v := View{Now: t0, Local: fastLocal(), Peers: peers}
	b.ReportAllocs()
	for b.Loop() {
		Decide(Route{PromptTokens: tPrompt, MaxTokens: 1}, v, p)
	}
}
