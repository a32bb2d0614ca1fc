package workload

import (
	"fmt"
	"strconv"
	"time"
)

// ChatConfig configures the multi-turn chat workload.
type ChatConfig struct {
	// Requests is the total number of turns; conversations are added until
	// it is reached (the last one may be cut short).
	Requests int
	// Turns is the mean number of turns of a conversation (uniform in
	// 1..2*Turns-1); 0 means 6.
	Turns int
	// SystemTokens is the system prompt every conversation starts with
	// (shared by all); 0 means 256.
	SystemTokens int
	// UserTokens and ReplyTokens are the mean lengths of a user message and
	// of a reply (uniform within +-50%); 0 means 64 and 128.
	UserTokens, ReplyTokens int
	// Think is the mean pause (exponential) between a reply and the user's
	// next turn; 0 means 5 s.
	Think time.Duration
	// Away is the probability that the user leaves before a turn and comes
	// back after a pause of mean AwayTime (exponential); AwayTime 0 means
	// 120 s. A returning user's history may have been evicted meanwhile.
	Away     float64
	AwayTime time.Duration
	Vocab    int // 0 means 151936
	Peers    int
	// Arrivals start conversations (a closed-loop client runs its
	// conversations back to back).
	Arrivals Arrivals
	Seed     uint64
}

// Chat builds the multi-turn chat workload: turn k's prompt is the system
// prompt, then the k-1 earlier user messages and replies, then the new
// user message; its Reply is what the next turn's prompt repeats.
func Chat(cfg ChatConfig) (*Workload, error) {
	if cfg.Requests < 1 {
		return nil, fmt.Errorf("workload: %d requests", cfg.Requests)
	}
	if cfg.Away < 0 || cfg.Away > 1 {
		return nil, fmt.Errorf("workload: away probability %g", cfg.Away)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Turns, 6)
	def(&cfg.SystemTokens, 256)
	def(&cfg.UserTokens, 64)
	def(&cfg.ReplyTokens, 128)
	def(&cfg.Vocab, 151936)
	if cfg.Think <= 0 {
		cfg.Think = 5 * time.Second
	}
	if cfg.AwayTime <= 0 {
		cfg.AwayTime = 120 * time.Second
	}
	r := newRand(cfg.Seed, 5)
	sys := append([]int32{1}, randomTokens(r, cfg.SystemTokens, cfg.Vocab)...)
	around := func(mean int) int { return max(1, mean/2+r.IntN(mean+1)) }
	exp := func(mean time.Duration) time.Duration { return time.Duration(r.ExpFloat64() * float64(mean)) }
	w := &Workload{Name: "chat"}
	for len(w.Requests) < cfg.Requests {
		s := len(w.Sessions)
		w.Sessions = append(w.Sessions, Session{})
		turns := 1 + r.IntN(2*cfg.Turns-1)
		hist := sys
		for k := 0; k < turns && len(w.Requests) < cfg.Requests; k++ {
			prompt := append(append(make([]int32, 0, len(hist)+2*cfg.UserTokens), hist...), randomTokens(r, around(cfg.UserTokens), cfg.Vocab)...)
			var think time.Duration
			if k > 0 {
				think = exp(cfg.Think)
				if r.Float64() < cfg.Away {
					think += exp(cfg.AwayTime)
				}
			}
			req := w.add(s, Request{Prompt: prompt, Reply: randomTokens(r, around(cfg.ReplyTokens), cfg.Vocab),
				Group: "conv-" + strconv.Itoa(s), Think: think})
			hist = append(prompt[:len(prompt):len(prompt)], req.Reply...)
		}
	}
	if err := w.place(cfg.Arrivals, cfg.Peers, newRand(cfg.Seed, 6)); err != nil {
		return nil, err
	}
	return w, nil
}
