package node

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Reason says why Decide chose what it chose.
type Reason string

// Reasons.
const (
	// ReasonLocal: local was best, or no peer beat it by the margin.
	ReasonLocal Reason = "served-local"
	// ReasonForward: a peer beat local by the margin.
	ReasonForward Reason = "forwarded"
	// ReasonRefusedRTT: a peer held more of the prompt and would have won
	// on compute alone, but the link (RTT, transfer, or an unmeasured RTT)
	// cost more than the prefill it would save.
	ReasonRefusedRTT Reason = "refused-rtt"
	// ReasonNoPeers: no peer was a candidate and none was skipped for
	// push-back (none known, or none with a fresh load announcement).
	ReasonNoPeers Reason = "no-peers"
	// ReasonPushBack: a peer that would have won was skipped because it
	// advertised push-back or is cooling down after a busy answer or a
	// failure.
	ReasonPushBack Reason = "push-back"
)

// Decision is where a request runs, and why.
type Decision struct {
	// Local is set when the request is served by the local engine.
	Local bool
	// Peer is the peer to forward to when !Local.
	Peer PeerID
	// Fallbacks are the next-best peers, in order, that still beat local
	// by the margin: tried after Peer fails, before local.
	Fallbacks []PeerID
	// Candidates are Peer and Fallbacks with their costs and discounted
	// estimates, in the same order (empty when Local).
	Candidates []Candidate
	// Reason says why.
	Reason Reason
	// LocalCost is the expected completion time on the local engine.
	LocalCost time.Duration
	// PeerCost is the best eligible peer's expected completion time (0
	// when no peer was eligible), whether or not it was chosen.
	PeerCost time.Duration
	// EstimatedCached is the chosen peer's discounted cache estimate, or
	// the local exact match when Local.
	EstimatedCached int
	// Eligible counts the peers that were scored; PushBackSkips those
	// skipped for push-back or a cooldown.
	Eligible, PushBackSkips int
}

// Candidate is one peer Decide would forward to.
type Candidate struct {
	Peer            PeerID
	Cost            time.Duration
	EstimatedCached int
}

func (d Decision) String() string {
	if d.Local {
		return fmt.Sprintf("local (%s) local=%v best-peer=%v cached=%d", d.Reason, d.LocalCost, d.PeerCost, d.EstimatedCached)
	}
	return fmt.Sprintf("forward %s fallbacks=%v local=%v peer=%v est-cached=%d", d.Peer, d.Fallbacks, d.LocalCost, d.PeerCost, d.EstimatedCached)
}

// Decide chooses where a request runs. It is a pure function: no IO, no
// clock (v.Now is the time), no randomness; equal inputs give equal
// decisions.
//
// The expected completion time of the request on a peer X is
//
//	cost(X) = wait(X) + prefill(X) + decode(X) + net(X)
//
// where
//
//   - prefill(X) = (prompt - cached(X)) / X's prefill speed; cached is the
//     exact local match for local, and for a peer its digest estimate
//     discounted for age (see discountCached), both capped at all but the
//     prompt's last token (an engine always computes that one);
//   - decode(X) = reply tokens / X's decode speed (reply tokens: MaxTokens,
//     or Policy.AssumedReplyTokens), so a fast peer can win without cache;
//   - wait(X) = ahead(X) / slots(X) * service(X), where ahead is the queue
//     depth plus one when every slot is busy, and service = prefill +
//     decode of this request there: queued requests are assumed to cost
//     what this one does (the workload is self-similar; a specialist's
//     queue is mostly prompts it holds too);
//   - net(X) = 0 for local, else RTT * Policy.StreamRoundTrips + (4 bytes a
//     prompt token + request overhead + reply bytes) / bandwidth, with the
//     relay bandwidth for a relayed peer.
//
// A speed nobody measured is the local one, or Policy's assumed one.
// Peers without a fresh load announcement, with push-back or a cooldown, or
// with an unmeasured RTT (unless Policy.UnknownRTT sets a stand-in) are not
// candidates. The request is forwarded to the cheapest candidate only when
// its saving over local exceeds both Policy.MinSaving and
// Policy.MinSavingFraction of local's cost; the other candidates that
// clear the margin become the fallbacks, cheapest first (ties: fewer
// failures, then peer ID).
func Decide(req Route, v View, p Policy) Decision {
	reply := req.MaxTokens
	if reply <= 0 {
		reply = p.AssumedReplyTokens
	}
	localPrefill := speedOr(v.Local.PrefillTokPerSec, p.AssumedPrefillTokPerSec)
	localDecode := speedOr(v.Local.DecodeTokPerSec, p.AssumedDecodeTokPerSec)
	// An engine reuses at most all but the last prompt token: it must
	// compute that one to get the first reply token's logits.
	reusable := max(req.PromptTokens-1, 0)
	localCached := clamp(v.Local.Cached, 0, reusable)
	d := Decision{
		EstimatedCached: localCached,
		LocalCost: seconds(cost(req.PromptTokens-localCached, reply, localPrefill, localDecode,
			v.Local.QueueDepth, v.Local.Active, v.Local.Slots)),
	}
	saves := func(c time.Duration) bool {
		s := d.LocalCost - c
		return s > p.MinSaving && float64(s) > p.MinSavingFraction*float64(d.LocalCost)
	}

	type scored struct {
		Candidate
		failures int
	}
	var cands []scored
	var pushBackWins, rttLoses bool
	for _, pv := range v.Peers {
		if pv.Slots <= 0 || pv.LoadAge > p.LoadTTL || pv.LoadAge < 0 {
			continue // load unknown or expired
		}
		cached := discountCached(clamp(pv.EstimatedCached, 0, reusable), pv.EstimateAge, pv.Gap, p)
		compute := cost(req.PromptTokens-cached, reply,
			speedOr(pv.PrefillTokPerSec, localPrefill), speedOr(pv.DecodeTokPerSec, localDecode),
			pv.QueueDepth, pv.Active, pv.Slots)
		rtt, rttOK := pv.RTT, pv.RTTKnown
		if !rttOK && p.UnknownRTT > 0 {
			rtt, rttOK = p.UnknownRTT, true
		}
		total := seconds(compute + netCost(req.PromptTokens, reply, rtt, pv.Relayed, p))
		if pv.PushBack || v.Now.Before(pv.CooldownUntil) {
			d.PushBackSkips++
			if rttOK && saves(total) {
				pushBackWins = true
			}
			continue
		}
		if !rttOK {
			if cached > localCached && saves(seconds(compute)) {
				rttLoses = true
			}
			continue
		}
		d.Eligible++
		cands = append(cands, scored{Candidate{pv.ID, total, cached}, pv.Failures})
		if !saves(total) && cached > localCached && saves(seconds(compute)) {
			rttLoses = true
		}
	}
	slices.SortFunc(cands, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(a.failures, b.failures), cmp.Compare(a.Peer, b.Peer))
	})
	if len(cands) > 0 {
		d.PeerCost = cands[0].Cost
	}
	for _, c := range cands {
		if !saves(c.Cost) || len(d.Candidates) > p.MaxFallbacks {
			break
		}
		d.Candidates = append(d.Candidates, c.Candidate)
	}
	if len(d.Candidates) > 0 {
		d.Reason = ReasonForward
		d.Peer = d.Candidates[0].Peer
		d.EstimatedCached = d.Candidates[0].EstimatedCached
		for _, c := range d.Candidates[1:] {
			d.Fallbacks = append(d.Fallbacks, c.Peer)
		}
		return d
	}
	d.Local = true
	switch {
	case pushBackWins:
		d.Reason = ReasonPushBack
	case rttLoses:
		d.Reason = ReasonRefusedRTT
	case len(cands) == 0 && d.PushBackSkips == 0:
		d.Reason = ReasonNoPeers
	default:
		d.Reason = ReasonLocal
	}
	return d
}

// cost is wait + prefill + decode on one engine (no network), in seconds.
func cost(uncached, reply int, prefillTPS, decodeTPS float64, queue, active, slots int) float64 {
	service := float64(max(uncached, 0))/prefillTPS + float64(max(reply, 0))/decodeTPS
	slots = max(slots, 1)
	ahead := float64(max(queue, 0))
	if active >= slots {
		ahead++
	}
	return service * (1 + ahead/float64(slots))
}

// netCost is what forwarding adds, in seconds: the stream's round trips
// and the transfer of the prompt (as tokens) and the reply.
func netCost(prompt, reply int, rtt time.Duration, relayed bool, p Policy) float64 {
	bw := p.Bandwidth
	if relayed {
		bw = p.RelayBandwidth
	}
	bytes := 4*float64(max(prompt, 0)) + float64(p.RequestOverheadBytes) + float64(max(reply, 0))*float64(p.ReplyBytesPerToken)
	return max(rtt, 0).Seconds()*float64(p.StreamRoundTrips) + bytes/bw
}

// discountCached shrinks a peer's estimate with its age: unchanged within
// Policy.EstimateGrace, then linearly to 0 over Policy.EstimateHorizon. A
// replica with a gap counts as at least EstimateGrace old, so it starts to
// shrink as soon as it ages further.
func discountCached(est int, age time.Duration, gap bool, p Policy) int {
	if gap {
		age = max(age, p.EstimateGrace)
	}
	if age <= p.EstimateGrace {
		return est
	}
	f := 1 - float64(age-p.EstimateGrace)/float64(p.EstimateHorizon)
	if f <= 0 {
		return 0
	}
	return int(float64(est) * f)
}

func speedOr(s, def float64) float64 {
	if s > 0 {
		return s
	}
	return def
}

// maxCost caps a cost: absurd inputs (huge queues, zero speeds) saturate
// instead of overflowing.
const maxCost = time.Duration(1 << 62)

// seconds converts a cost in seconds, saturating at maxCost (NaN too).
func seconds(s float64) time.Duration {
	switch {
	case s <= 0:
		return 0
	case !(s < maxCost.Seconds()):
		return maxCost
	}
	return time.Duration(s * float64(time.Second))
}

func clamp(x, lo, hi int) int { return max(lo, min(x, hi)) }
