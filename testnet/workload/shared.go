package workload

import (
	"fmt"
	"strconv"
)

// SharedPrefixConfig configures the shared-system-prompt workload (SGLang's
// generated-shared-prefix shape): Groups system prompts of SystemTokens
// tokens, each followed by questions of QuestionTokens tokens.
type SharedPrefixConfig struct {
	Requests       int
	Groups         int  // 0 means 16
	SystemTokens   int  // 0 means 1024
	QuestionTokens int  // 0 means 128
	ReplyTokens    int  // 0 means 16
	Skew           Skew // the groups' popularity
	Vocab          int  // 0 means 151936
	Peers          int
	Arrivals       Arrivals
	Seed           uint64
}

// SharedPrefix builds the shared-system-prompt workload: one request per
// session, the group drawn with cfg.Skew, the question fresh random tokens.
func SharedPrefix(cfg SharedPrefixConfig) (*Workload, error) {
	if cfg.Requests < 1 {
		return nil, fmt.Errorf("workload: %d requests", cfg.Requests)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Groups, 16)
	def(&cfg.SystemTokens, 1024)
	def(&cfg.QuestionTokens, 128)
	def(&cfg.ReplyTokens, 16)
	def(&cfg.Vocab, 151936)
	r := newRand(cfg.Seed, 3)
	sys := make([][]int32, cfg.Groups)
	for g := range sys {
		sys[g] = append([]int32{1}, randomTokens(r, cfg.SystemTokens, cfg.Vocab)...) // BOS first
	}
	pick := newSampler(cfg.Skew, cfg.Groups, r)
	w := &Workload{Name: fmt.Sprintf("shared-prefix %dx%d+%d %s", cfg.Groups, cfg.SystemTokens, cfg.QuestionTokens, cfg.Skew)}
	for range cfg.Requests {
		g := pick.draw(r)
		p := append(append(make([]int32, 0, len(sys[g])+cfg.QuestionTokens), sys[g]...), randomTokens(r, cfg.QuestionTokens, cfg.Vocab)...)
		w.Sessions = append(w.Sessions, Session{})
		w.add(len(w.Sessions)-1, Request{Prompt: p, Reply: randomTokens(r, cfg.ReplyTokens, cfg.Vocab), Group: "group-" + strconv.Itoa(g)})
	}
	if err := w.place(cfg.Arrivals, cfg.Peers, newRand(cfg.Seed, 4)); err != nil {
		return nil, err
	}
	return w, nil
}
