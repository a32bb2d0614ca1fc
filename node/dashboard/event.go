package dashboard

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshllm/meshllm/node"
)

// Event is one update of the dashboard page, sent as the data of
// a server-sent event (and served whole at /ui/state).
//
// The first event a page receives ("snapshot") carries the latest
// decisions and the whole chart history; each later one ("tick") carries
// the decisions made since the previous event and one new sample.
type Event struct {
	// Seq numbers the events of one dashboard: a tick's Seq is the
	// previous event's plus one.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Self is this peer's ID; Status is the mesh as this peer sees it.
	Self   node.PeerID     `json:"self"`
	Status node.MeshStatus `json:"status"`
	// HotPrefixes are this peer's hottest cached prefixes, hottest first.
	HotPrefixes []HotPrefix `json:"hot_prefixes,omitempty"`
	// Decisions are routing decisions, oldest first.
	Decisions []DecisionEvent `json:"decisions"`
	// Samples are chart points, oldest first.
	Samples []Sample `json:"samples"`
	// IntervalMillis is the time between ticks.
	IntervalMillis float64 `json:"interval_ms"`
}

// DecisionEvent is a DecisionRecord as the dashboard's feed shows it.
type DecisionEvent struct {
	node.DecisionRecord
	// Kind is what happened, in one word: "local" (served here),
	// "forwarded" (served by a peer), "refused" (a peer held more of the
	// prompt but the link cost exceeded the saving), "push-back" (the best
	// peer was busy or cooling down), "fallback" (a forward failed and the
	// next peer or local served it) or "failed".
	Kind string `json:"kind"`
	// Summary says it in a sentence.
	Summary string `json:"summary"`
}

// Decision kinds.
const (
	feedLocal     = "local"
	feedForwarded = "forwarded"
	feedRefused   = "refused"
	feedPushBack  = "push-back"
	feedFallback  = "fallback"
	feedFailed    = "failed"
)

// describeDecision turns a record into a feed entry.
func describeDecision(rec node.DecisionRecord) DecisionEvent {
	ev := DecisionEvent{DecisionRecord: rec}
	failed := failedAttempts(rec.Attempts)
	switch {
	case rec.Err != "":
		ev.Kind = feedFailed
		ev.Summary = "failed: " + rec.Err
	case rec.Continued:
		ev.Kind = feedFallback
		ev.Summary = fmt.Sprintf("fell back: %s; finished locally mid-reply", failed)
	case len(rec.Attempts) > 0 && rec.ServedBy == "":
		ev.Kind = feedFallback
		ev.Summary = fmt.Sprintf("fell back: %s; served locally", failed)
	case rec.ServedBy != "" && failed != "":
		ev.Kind = feedFallback
		ev.Summary = fmt.Sprintf("fell back: %s; forwarded to %s instead", failed, shortPeer(rec.ServedBy))
	case rec.ServedBy != "":
		ev.Kind = feedForwarded
		ev.Summary = fmt.Sprintf("forwarded to %s: ~%d of %d prompt tokens cached there, expected %s vs %s locally",
			shortPeer(rec.ServedBy), rec.EstimatedCached, rec.PromptTokens, fmtMillis(rec.PeerCostMillis), fmtMillis(rec.LocalCostMillis))
	case rec.Reason == node.ReasonRefusedRTT:
		ev.Kind = feedRefused
		ev.Summary = fmt.Sprintf("served locally: a peer held more of the prompt, but the link cost more than the prefill it saves (%s there vs %s here)",
			fmtMillis(rec.PeerCostMillis), fmtMillis(rec.LocalCostMillis))
	case rec.Reason == node.ReasonPushBack:
		ev.Kind = feedPushBack
		ev.Summary = "served locally: the best peer is pushing back (busy or cooling down)"
	case rec.Reason == node.ReasonForwardPolicy:
		ev.Kind = feedLocal
		ev.Summary = fmt.Sprintf("served locally: the forward setting (%s) excludes every peer that could serve it", rec.Forward)
	case rec.Reason == node.ReasonNoPeers:
		ev.Kind = feedLocal
		ev.Summary = fmt.Sprintf("served locally: no peer to forward to (%d of %d tokens cached here)", rec.RealizedCached, rec.PromptTokens)
	default:
		ev.Kind = feedLocal
		ev.Summary = fmt.Sprintf("served locally: %d of %d tokens cached here, expected %s", rec.RealizedCached, rec.PromptTokens, fmtMillis(rec.LocalCostMillis))
		if rec.PeerCostMillis > 0 {
			ev.Summary += fmt.Sprintf(" (best peer %s)", fmtMillis(rec.PeerCostMillis))
		}
	}
	return ev
}

// failedAttempts lists the attempts that did not serve, as "B answered
// busy, C timed out".
func failedAttempts(as []node.Attempt) string {
	var parts []string
	for _, a := range as {
		if a.Outcome == "served" {
			continue
		}
		what := "failed (" + a.Outcome + ")"
		switch a.Outcome {
		case "busy":
			what = "answered busy"
		case "timeout":
			what = "timed out"
		case "error":
			what = "failed"
		case "rejected":
			what = "rejected the request"
		case "client":
			what = "lost the client"
		}
		parts = append(parts, shortPeer(a.Peer)+" "+what)
	}
	return strings.Join(parts, ", ")
}

// fmtMillis formats milliseconds for a summary.
func fmtMillis(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// shortPeer shortens a peer ID for display: libp2p IDs share their first
// characters ("12D3KooW"), so the last six tell peers apart.
func shortPeer(id node.PeerID) string {
	if len(id) <= 10 {
		return string(id)
	}
	return "…" + string(id[len(id)-6:])
}

// Sample is one interval's point on the dashboard's charts.
type Sample struct {
	Time time.Time `json:"time"`
	// Requests routed in the interval (decisions that ended in it), and
	// how many of them were forwarded, fell back or failed.
	Requests  int `json:"requests"`
	Forwarded int `json:"forwarded"`
	Fallbacks int `json:"fallbacks"`
	Failed    int `json:"failed"`
	// Served counts the requests each peer finished, this peer included
	// (under its own ID): the traffic share per peer.
	Served map[node.PeerID]int `json:"served,omitempty"`
	// PromptTokens and CachedTokens over the requests that succeeded;
	// HitRate is their ratio (absent without requests).
	PromptTokens int      `json:"prompt_tokens"`
	CachedTokens int      `json:"cached_tokens"`
	HitRate      *float64 `json:"hit_rate,omitempty"`
	// TTFTMillis is the mean time to first token of the requests the API
	// answered in the interval (absent without any, or without a
	// registry).
	TTFTMillis *float64 `json:"ttft_ms,omitempty"`
}

// dashSampleOf summarizes the decisions that ended in one interval.
func dashSampleOf(now time.Time, self node.PeerID, evs []DecisionEvent) Sample {
	s := Sample{Time: now}
	for _, ev := range evs {
		s.Requests++
		switch ev.Kind {
		case feedForwarded:
			s.Forwarded++
		case feedFallback:
			s.Fallbacks++
		case feedFailed:
			s.Failed++
			continue
		}
		by := ev.ServedBy
		if by == "" {
			by = self
		}
		if s.Served == nil {
			s.Served = map[node.PeerID]int{}
		}
		s.Served[by]++
		s.PromptTokens += ev.PromptTokens
		s.CachedTokens += ev.RealizedCached
	}
	if s.PromptTokens > 0 {
		r := float64(s.CachedTokens) / float64(s.PromptTokens)
		s.HitRate = &r
	}
	return s
}

// decisionCursor finds the decisions a ring-buffer listing holds that an
// earlier listing did not: the ones after the last record seen. Records
// are told apart by their start time, duration, sizes and outcome; two
// records equal in all of those (possible only under a frozen clock) are
// indistinguishable, and the later one may be missed.
type decisionCursor struct {
	last decisionKey
	ok   bool
}

type decisionKey struct {
	start                 int64
	dur, local, peer      float64
	prompt, est, realized int
	reason                node.Reason
	served                node.PeerID
	err                   string
}

func decisionKeyOf(r node.DecisionRecord) decisionKey {
	return decisionKey{start: r.Time.UnixNano(), dur: r.DurationMillis, local: r.LocalCostMillis, peer: r.PeerCostMillis,
		prompt: r.PromptTokens, est: r.EstimatedCached, realized: r.RealizedCached, reason: r.Reason,
		served: r.ServedBy, err: r.Err}
}

// advance returns the records of list (oldest first) after the last one
// seen, and remembers list's last. When the last one seen is gone from the
// ring (more new records than it holds), all of list is new.
func (c *decisionCursor) advance(list []node.DecisionRecord) []node.DecisionRecord {
	start := 0
	if c.ok {
		for i := len(list) - 1; i >= 0; i-- {
			if decisionKeyOf(list[i]) == c.last {
				start = i + 1
				break
			}
		}
	}
	if len(list) > 0 {
		c.last, c.ok = decisionKeyOf(list[len(list)-1]), true
	}
	return list[start:]
}
