package main

import (
	"context"
	"time"
)

// sample is one scrape of a peer's runtime metrics.
type sample struct {
	At          time.Time `json:"at"`
	Peer        int       `json:"peer"`
	Incarnation int       `json:"incarnation"`
	Goroutines  float64   `json:"goroutines"`
	RSS         float64   `json:"rss_bytes"`
	Heap        float64   `json:"heap_bytes"`
}

// sample scrapes every running peer's /metrics every interval until ctx
// ends (frozen and dead peers are skipped).
func (m *mesh) sample(ctx context.Context, every time.Duration) []sample {
	var out []sample
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, s := range m.slots {
			m.mu.Lock()
			st, inc := s.state, s.incarnation
			m.mu.Unlock()
			if st != up {
				continue
			}
			met, err := s.p.Metrics(ctx)
			if err != nil {
				continue
			}
			out = append(out, sample{At: time.Now(), Peer: s.index, Incarnation: inc,
				Goroutines: met["go_goroutines"], RSS: met["process_resident_memory_bytes"],
				Heap: met["go_memstats_heap_alloc_bytes"]})
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}
