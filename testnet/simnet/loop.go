package simnet

import (
	"container/heap"
	"time"
)

// epoch is the wall-clock instant virtual time 0 maps to (node's APIs take
// time.Time).
var epoch = time.Unix(1_700_000_000, 0)

// loop is the event loop: a virtual clock and a queue of events ordered by
// time, then by scheduling order (so runs are deterministic).
type loop struct {
	now    time.Duration
	seq    uint64
	q      events
	events int // events run
}

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	old[len(old)-1] = event{}
	*e = old[:len(old)-1]
	return x
}

// at schedules fn at virtual time t (not before now).
func (l *loop) at(t time.Duration, fn func()) {
	l.seq++
	heap.Push(&l.q, event{at: max(t, l.now), seq: l.seq, fn: fn})
}

// after schedules fn d from now.
func (l *loop) after(d time.Duration, fn func()) { l.at(l.now+d, fn) }

// step runs the next event; false when none is left.
func (l *loop) step() bool {
	if len(l.q) == 0 {
		return false
	}
	e := heap.Pop(&l.q).(event)
	l.now = e.at
	l.events++
	e.fn()
	return true
}

// wall is virtual time t as a time.Time.
func wall(t time.Duration) time.Time { return epoch.Add(t) }
