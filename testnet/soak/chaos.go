package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

// faultEvent is one fault the chaos loop injected.
type faultEvent struct {
	At   time.Time     `json:"at"`
	Peer int           `json:"peer"`
	Kind string        `json:"kind"` // kill, term (graceful), freeze
	For  time.Duration `json:"for_ns"`
	// Back is how long the restart took (kill, term) until the peer
	// printed its addresses.
	Back time.Duration `json:"back_ns"`
	Err  string        `json:"error,omitempty"`
}

// jitter is d scaled by a random factor in [0.5, 1.5).
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rng.Float64()))
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// chaos faults a random peer other than peer 0 every faultEvery or so
// until ctx ends: SIGKILL and restart (half the faults), SIGTERM and
// restart, or SIGSTOP and SIGCONT. It leaves every peer running.
func (m *mesh) chaos(ctx context.Context, rng *rand.Rand) []faultEvent {
	var events []faultEvent
	for sleep(ctx, jitter(rng, m.cfg.faultEvery)) {
		s := m.slots[1+rng.IntN(len(m.slots)-1)]
		ev := faultEvent{Peer: s.index, For: jitter(rng, m.cfg.downFor)}
		switch r := rng.Float64(); {
		case r < 0.5:
			ev.Kind = "kill"
		case r < 0.75:
			ev.Kind = "term"
		default:
			ev.Kind = "freeze"
		}
		if err := m.drain(ctx, s); err != nil {
			m.setState(s, up)
			break
		}
		ev.At = time.Now()
		if err := m.inject(s, &ev); err != nil {
			ev.Err = err.Error()
		}
		events = append(events, ev)
		fmt.Fprintf(os.Stderr, "soak: %s %s p%d for %s %s\n", ev.At.Format("15:04:05"), ev.Kind, ev.Peer,
			ev.For.Round(time.Millisecond), ev.Err)
	}
	return events
}

// inject runs one fault on s, sleeping through its length whatever ctx
// says, and brings s back.
func (m *mesh) inject(s *slot, ev *faultEvent) error {
	defer m.setState(s, up)
	if ev.Kind == "freeze" {
		m.setState(s, frozen)
		if err := s.p.Stop(); err != nil {
			return err
		}
		time.Sleep(ev.For)
		return s.p.Cont()
	}
	m.setState(s, down)
	var err error
	if ev.Kind == "kill" {
		err = s.p.Kill()
	} else {
		err = s.p.Terminate(15 * time.Second)
	}
	if err != nil {
		return err
	}
	time.Sleep(ev.For)
	start := time.Now()
	err = s.p.Restart(context.Background(), "--bootstrap", m.slots[0].p.Addr())
	ev.Back = time.Since(start)
	if err == nil {
		m.restarted(s)
	}
	return err
}
