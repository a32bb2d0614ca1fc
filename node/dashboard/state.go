package dashboard

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"
)

// ttftMetric is the API's time-to-first-token histogram (metrics.go).
const ttftMetric = "meshllm_time_to_first_token_seconds"

// Step does one interval's work: it samples the router (new decisions,
// status), appends a chart sample, and sends one "tick" event to every
// connected page, disconnecting pages whose buffer is full. Run calls it
// every interval; tests call it directly.
func (d *Dashboard) Step() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	fresh := d.cursor.advance(d.cfg.Router.Recent())
	evs := make([]DecisionEvent, len(fresh))
	for i, rec := range fresh {
		evs[i] = describeDecision(rec)
	}
	s := dashSampleOf(now, d.self, evs)
	if mean, ok := d.ttft.delta(d.cfg.Registry); ok {
		s.TTFTMillis = &mean
	}
	d.pushSample(s)
	d.pushDecisions(evs)
	d.seq++
	ev := d.eventLocked(evs, []Sample{s})
	if len(d.subs) == 0 {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return // every field marshals; nothing to send otherwise
	}
	for sub := range d.subs {
		select {
		case sub.ch <- b:
		default:
			d.dropLocked(sub) // fell a whole buffer behind
		}
	}
}

// Snapshot returns the dashboard's state as a page connecting now sees
// it: the latest decisions and the whole chart history.
func (d *Dashboard) Snapshot() Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked()
}

func (d *Dashboard) snapshotLocked() Event {
	return d.eventLocked(append([]DecisionEvent(nil), d.decisions...), d.historyLocked())
}

// eventLocked builds an event with the current status; d.mu is held.
func (d *Dashboard) eventLocked(decisions []DecisionEvent, samples []Sample) Event {
	ev := Event{
		Seq: d.seq, Time: d.cfg.Now(), Self: d.self, Status: d.cfg.Router.Status(false),
		Decisions: decisions, Samples: samples,
		IntervalMillis: float64(d.cfg.Interval.Milliseconds()),
	}
	if d.cfg.HotPrefixes != nil {
		ev.HotPrefixes = d.cfg.HotPrefixes()
	}
	if ev.Decisions == nil {
		ev.Decisions = []DecisionEvent{}
	}
	if ev.Samples == nil {
		ev.Samples = []Sample{}
	}
	return ev
}

func (d *Dashboard) pushSample(s Sample) {
	d.hist[d.histNext] = s
	d.histNext = (d.histNext + 1) % len(d.hist)
	if d.histNext == 0 {
		d.histFull = true
	}
}

// historyLocked returns the samples, oldest first.
func (d *Dashboard) historyLocked() []Sample {
	if !d.histFull {
		return append([]Sample(nil), d.hist[:d.histNext]...)
	}
	out := make([]Sample, 0, len(d.hist))
	out = append(out, d.hist[d.histNext:]...)
	return append(out, d.hist[:d.histNext]...)
}

func (d *Dashboard) pushDecisions(evs []DecisionEvent) {
	d.decisions = append(d.decisions, evs...)
	if over := len(d.decisions) - d.cfg.Decisions; over > 0 {
		d.decisions = append([]DecisionEvent(nil), d.decisions[over:]...)
	}
}

// ttftCounter turns the cumulative TTFT histogram into per-interval means.
type ttftCounter struct {
	sum   float64
	count uint64
}

// delta gathers the histogram and returns the mean TTFT in milliseconds
// of the observations since the previous call; ok is false when there
// were none (or no registry, or no such metric yet).
func (c *ttftCounter) delta(g prometheus.Gatherer) (meanMillis float64, ok bool) {
	if g == nil {
		return 0, false
	}
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return 0, false
	}
	var sum float64
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() != ttftMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				sum += h.GetSampleSum()
				count += h.GetSampleCount()
			}
		}
	}
	dn, ds := count-c.count, sum-c.sum
	if count < c.count { // the histogram was replaced: start over
		dn, ds = count, sum
	}
	c.sum, c.count = sum, count
	if dn == 0 {
		return 0, false
	}
	return ds / float64(dn) * 1000, true
}
