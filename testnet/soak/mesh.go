package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/meshllm/meshllm/testnet/faults"
)

// state of a peer as the soak sees it.
type state int

const (
	up       state = iota
	draining       // chosen for a fault: the client sends it nothing new
	down           // killed, not yet restarted
	frozen         // SIGSTOPped
)

// slot is one peer of the mesh across its restarts.
type slot struct {
	index int
	p     *faults.Peer
	// guarded by mesh.mu
	state       state
	inflight    int // client requests sent to it and not yet answered
	incarnation int
}

// mesh is the soak's peers. mu guards the slots' state, inflight and
// incarnation; the peers' own methods are called by one goroutine at a
// time per peer (chaos, or startMesh/close before and after it).
type mesh struct {
	cfg   config
	dir   string
	mu    sync.Mutex
	slots []*slot
}

// startMesh starts peer 0 as the bootstrap peer and the others through
// it, and waits until peer 0 knows them all.
func startMesh(ctx context.Context, cfg config) (*mesh, error) {
	dir, err := os.MkdirTemp("", "meshllm-soak-")
	if err != nil {
		return nil, err
	}
	m := &mesh{cfg: cfg, dir: dir}
	for i := range cfg.peers {
		args := []string{"--bootstrap-node"}
		if i > 0 {
			args = []string{"--bootstrap", m.slots[0].p.Addr()}
		}
		p, err := faults.Start(ctx, faults.Spec{Bin: cfg.bin, Model: cfg.model, Name: fmt.Sprintf("p%d", i),
			DataDir: filepath.Join(dir, fmt.Sprintf("p%d", i)), Args: args})
		if err != nil {
			m.close()
			return nil, err
		}
		m.slots = append(m.slots, &slot{index: i, p: p})
	}
	boot := m.slots[0].p
	err = faults.WaitFor(ctx, "peer 0 to know every peer", 2*time.Minute, func() bool {
		for _, s := range m.slots[1:] {
			if !boot.Knows(ctx, s.p.ID(), false) {
				return false
			}
		}
		return true
	})
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// close kills every peer and removes their data.
func (m *mesh) close() {
	for _, s := range m.slots {
		s.p.Kill()
	}
	os.RemoveAll(m.dir)
}

// acquire picks a random peer that is up for a client request and counts
// the request in flight on it.
func (m *mesh) acquire(rng *rand.Rand) *slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ups []*slot
	for _, s := range m.slots {
		if s.state == up {
			ups = append(ups, s)
		}
	}
	s := ups[rng.IntN(len(ups))] // peer 0 is always up
	s.inflight++
	return s
}

func (m *mesh) release(s *slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.inflight--
}

func (m *mesh) setState(s *slot, st state) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.state = st
}

// restarted counts a new process of s.
func (m *mesh) restarted(s *slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.incarnation++
}

// drain takes s out of the client's choice and waits until the client's
// requests to it answered, so a fault hits only forwarded work.
func (m *mesh) drain(ctx context.Context, s *slot) error {
	m.setState(s, draining)
	return faults.WaitFor(ctx, "the client's requests to the victim", 3*time.Minute, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return s.inflight == 0
	})
}

// drive runs the client until ctx ends.
func (m *mesh) drive(ctx context.Context, w *workload) []faults.Result {
	var mu sync.Mutex
	taken := map[[2]int]*slot{} // (worker, seq) -> slot
	rngs := make([]*rand.Rand, m.cfg.workers)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(w.seed, uint64(i)))
	}
	d := &faults.Driver{
		Workers: m.cfg.workers,
		Ask:     w.ask,
		Target: func(worker, seq int) string {
			s := m.acquire(rngs[worker])
			mu.Lock()
			taken[[2]int{worker, seq}] = s
			mu.Unlock()
			return s.p.HTTP()
		},
		Done: func(r faults.Result) {
			mu.Lock()
			s := taken[[2]int{r.Worker, r.Seq}]
			delete(taken, [2]int{r.Worker, r.Seq})
			mu.Unlock()
			m.release(s)
		},
	}
	return d.Run(ctx)
}
