package workload

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Request is one generation request of a workload.
type Request struct {
	// ID is the request's index in Workload.Requests.
	ID int
	// Session is the index of the session the request belongs to, Turn its
	// position in it.
	Session, Turn int
	// Prompt is the tokenized prompt (BOS first).
	Prompt []int32
	// Reply is what the engine generates for it: len(Reply) is the request's
	// MaxTokens. Chat workloads put these tokens in the next turn's prompt.
	Reply []int32
	// Group names what the request shares its prefix with (the MMLU subject,
	// the conversation, the system-prompt group), for reports.
	Group string
	// Think is the pause between the previous request of the session
	// completing and this one being sent (0 for a session's first request).
	Think time.Duration
}

// Session is a sequence of requests sent one after another.
type Session struct {
	// Start is when the first request is sent, from the experiment's start;
	// only meaningful for open-loop arrivals (closed-loop clients start
	// sessions as they finish the previous one).
	Start time.Duration
	// Entry is the peer (0..peers-1) the session's requests enter the mesh at.
	Entry int
	// Client is the closed-loop client running the session, or -1 (open loop).
	Client int
	// Requests are indices into Workload.Requests, in order.
	Requests []int
}

// Workload is a reproducible request stream.
type Workload struct {
	// Name describes the workload ("mmlu zipf:1.1", ...).
	Name     string
	Requests []Request
	Sessions []Session
	// Clients is the number of closed-loop clients (0: open loop).
	Clients int
}

// Arrivals says when sessions start.
type Arrivals struct {
	// Rate is the mean session starts per second of a Poisson process (open
	// loop). Ignored when Clients > 0.
	Rate float64
	// Clients > 0 runs that many closed-loop clients instead: each runs its
	// sessions back to back, the next starting Think after the previous one
	// ended (sessions are dealt to clients round-robin).
	Clients int
	// Think is the closed-loop clients' pause between two sessions.
	Think time.Duration
}

// Validate reports an unusable Arrivals.
func (a Arrivals) Validate() error {
	if a.Clients < 0 || a.Think < 0 {
		return fmt.Errorf("workload: negative clients or think time")
	}
	if a.Clients == 0 && (a.Rate <= 0 || a.Rate != a.Rate) {
		return fmt.Errorf("workload: open-loop arrivals need a rate > 0")
	}
	return nil
}

// place assigns start times, clients and entry peers to w's sessions, drawn
// from r: sessions start in their order.
func (w *Workload) place(a Arrivals, peers int, r *rand.Rand) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if peers < 1 {
		return fmt.Errorf("workload: %d peers", peers)
	}
	w.Clients = a.Clients
	var t time.Duration
	for i := range w.Sessions {
		s := &w.Sessions[i]
		s.Entry = r.IntN(peers)
		s.Client = -1
		if a.Clients > 0 {
			s.Client = i % a.Clients
			if i >= a.Clients {
				// Closed loop: the client waits Think after its previous
				// session before starting this one.
				w.Requests[s.Requests[0]].Think = a.Think
			}
			continue
		}
		t += time.Duration(r.ExpFloat64() / a.Rate * float64(time.Second))
		s.Start = t
	}
	return nil
}

// add appends a request to session s and returns it.
func (w *Workload) add(s int, req Request) *Request {
	req.ID = len(w.Requests)
	req.Session = s
	req.Turn = len(w.Sessions[s].Requests)
	w.Requests = append(w.Requests, req)
	w.Sessions[s].Requests = append(w.Sessions[s].Requests, req.ID)
	return &w.Requests[req.ID]
}

// Stats summarizes a workload's size.
type Stats struct {
	Requests, Sessions    int
	PromptTokens          int     // all requests' prompt tokens
	MeanPrompt, MeanReply float64 // tokens per request
}

// Stats returns w's size.
func (w *Workload) Stats() Stats {
	s := Stats{Requests: len(w.Requests), Sessions: len(w.Sessions)}
	reply := 0
	for _, r := range w.Requests {
		s.PromptTokens += len(r.Prompt)
		reply += len(r.Reply)
	}
	if n := len(w.Requests); n > 0 {
		s.MeanPrompt = float64(s.PromptTokens) / float64(n)
		s.MeanReply = float64(reply) / float64(n)
	}
	return s
}

// randomTokens returns n ids drawn from r in [3, vocab) (0..2 are special).
func randomTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = 3 + int32(r.IntN(vocab-3))
	}
	return out
}

// newRand returns the generator of one stream of a seed: distinct streams
// of one seed are independent, so adding a draw to one does not shift the
// others.
func newRand(seed uint64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^0x6d65_73686c6c6d))
}
