package node

import (
	"sync"
	"time"

	"github.com/meshllm/meshllm/node/forward"
)

// DecisionRecord is one routed request as the dashboard and /v1/mesh see
// it: the decision, what was tried, and how it ended.
type DecisionRecord struct {
	Time         time.Time `json:"time"`
	PromptTokens int       `json:"prompt_tokens"`
	MaxTokens    int       `json:"max_tokens"`
	Reason       Reason    `json:"reason"`
	// Forward is the forward policy the request was decided under: the
	// peer's --forward narrowed by the request's (see forward.Resolve).
	Forward forward.Policy `json:"forward"`
	// Chosen is the peer Decide chose ("" when local); Fallbacks the ones
	// behind it.
	Chosen    PeerID   `json:"chosen,omitempty"`
	Fallbacks []PeerID `json:"fallbacks,omitempty"`
	// LocalCostMillis and PeerCostMillis are Decide's expectations.
	LocalCostMillis float64 `json:"local_cost_ms"`
	PeerCostMillis  float64 `json:"peer_cost_ms,omitempty"`
	// Attempts are the forwards tried, in order.
	Attempts []Attempt `json:"attempts,omitempty"`
	// ServedBy is the peer that finished the reply ("" when local).
	ServedBy PeerID `json:"served_by,omitempty"`
	// Continued is set when a peer failed mid-stream and the local engine
	// finished the reply.
	Continued bool `json:"continued,omitempty"`
	// EstimatedCached is what Decide expected the server to reuse,
	// RealizedCached what it reported.
	EstimatedCached int     `json:"estimated_cached"`
	RealizedCached  int     `json:"realized_cached"`
	DurationMillis  float64 `json:"duration_ms"`
	Err             string  `json:"error,omitempty"`
}

// Attempt is one forward of a request.
type Attempt struct {
	Peer PeerID `json:"peer"`
	// Outcome: "served", "busy", "timeout", "error", "rejected" (the peer
	// found the request bad; local decides), "violation" (the peer's reply
	// broke the request's bounds and was cut), or "client" (the client
	// went away).
	Outcome string `json:"outcome"`
	// Pieces streamed to the client before the outcome.
	Pieces int    `json:"pieces,omitempty"`
	Err    string `json:"error,omitempty"`
}

// recent is a fixed-size ring of the latest records. Safe for concurrent
// use (one mutex).
type recent struct {
	mu   sync.Mutex
	buf  []DecisionRecord
	next int
	full bool
}

func newRecent(n int) *recent { return &recent{buf: make([]DecisionRecord, max(n, 1))} }

func (r *recent) add(rec DecisionRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = rec
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// list returns the records, oldest first.
func (r *recent) list() []DecisionRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]DecisionRecord(nil), r.buf[:r.next]...)
	}
	out := make([]DecisionRecord, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
