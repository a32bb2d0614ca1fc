package node

import (
	"math"
	"testing"
	"time"
)

// FuzzDecide feeds Decide arbitrary views (negative counts, zero, huge,
// NaN and infinite speeds, huge queues and RTTs) and checks its
// invariants: no panic, costs never negative, and a forward always saves
// more than the margin over local.
func FuzzDecide(f *testing.F) {
	f.Add(600, 1, 0, 4, 0, 0, 5000.0, 200.0, 560, int64(time.Millisecond*2), 4, 0, 0, 5000.0, 200.0, int64(time.Second), false, false)
	f.Add(600, 0, 599, 0, -1, 1<<40, 0.0, math.Inf(1), 1<<30, int64(math.MaxInt64), -4, 1<<50, 7, math.NaN(), -1.0, int64(0), true, true)
	f.Fuzz(func(t *testing.T, prompt, maxTok, lCached, lSlots, lQueue, lActive int, lPre, lDec float64,
		est int, rtt int64, pSlots, pQueue, pActive int, pPre, pDec float64, age int64, relayed, gap bool) {
		p := DefaultPolicy()
		v := View{Now: t0,
			Local: LocalView{Cached: lCached, Slots: lSlots, QueueDepth: lQueue, Active: lActive, PrefillTokPerSec: lPre, DecodeTokPerSec: lDec},
			Peers: []PeerView{{ID: "B", EstimatedCached: est, EstimateAge: time.Duration(age), Gap: gap,
				RTT: time.Duration(rtt), RTTKnown: rtt >= 0, Slots: pSlots, QueueDepth: pQueue, Active: pActive,
				PrefillTokPerSec: pPre, DecodeTokPerSec: pDec, Relayed: relayed}},
		}
		d := Decide(Route{PromptTokens: prompt, MaxTokens: maxTok}, v, p)
		if d.LocalCost < 0 || d.PeerCost < 0 {
			t.Fatalf("negative cost: %v", d)
		}
		if !d.Local {
			saving := d.LocalCost - d.PeerCost
			if saving <= p.MinSaving || float64(saving) <= p.MinSavingFraction*float64(d.LocalCost) {
				t.Fatalf("forwarded without the margin: %v", d)
			}
			if d.Peer != "B" || d.Reason != ReasonForward {
				t.Fatalf("bad forward: %v", d)
			}
		} else if d.Reason == ReasonForward || d.Reason == "" {
			t.Fatalf("local with reason %q", d.Reason)
		}
	})
}
