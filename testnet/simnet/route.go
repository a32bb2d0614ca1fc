package simnet

import (
	"time"

	"github.com/meshllm/meshllm/infer"
)

// arrive is request id reaching its entry peer: the policy decides, then
// the decision is carried out the way node.Router.execute does.
func (c *Cluster) arrive(id, entry int) {
	rq := &c.w.Requests[id]
	entry = c.live(entry)
	rec := &c.recs[id]
	*rec = Record{ID: id, Entry: entry, Arrive: c.l.now, Prompt: len(rq.Prompt)}
	t0 := time.Now()
	targets := c.policy.route(c, entry, rq.Prompt, len(rq.Reply))
	rec.Decide = time.Since(t0)
	c.try(rec, targets)
}

// try sends the request to targets[0]; a refusal or failure moves on to
// the rest, and the entry peer serves it when none is left (or when a
// target is the entry peer itself).
func (c *Cluster) try(rec *Record, targets []int) {
	rq := &c.w.Requests[rec.ID]
	entry := rec.Entry
	if len(targets) == 0 || targets[0] == entry {
		c.serve(rec, entry)
		return
	}
	t, rest := targets[0], targets[1:]
	rec.Attempts++
	c.outstanding[t]++
	c.l.after(c.cfg.Net.Delay(entry, t, 4*len(rq.Prompt)+requestOverhead), func() {
		p := c.peers[t]
		back := func(bytes int, then func()) {
			c.outstanding[t]--
			c.l.after(c.cfg.Net.Delay(t, entry, bytes), then)
		}
		switch {
		case !p.up: // connection refused: the origin learns it one trip later
			back(busyBytes, func() {
				if m := c.peers[entry].mesh; m != nil {
					m.MarkFailure(p.id, wall(c.l.now))
				}
				c.try(rec, rest)
			})
			return
		case c.policy.kind() == gossiping && p.eng.Stats().Queued > c.cfg.Node.BusyQueueThreshold:
			// node.Router.ServeForwarded's busy answer.
			back(busyBytes, func() {
				c.peers[entry].mesh.MarkBusy(p.id, wall(c.l.now))
				c.try(rec, rest)
			})
			return
		}
		rec.Forwarded, rec.Server = true, t
		eng := p.eng
		eng.submit(rq.Prompt, rq.Reply, func() {
			c.l.after(c.cfg.Net.Delay(t, entry, pieceBytes), func() { rec.First = c.l.now })
		}, func(res *infer.Result) {
			c.outstanding[t]--
			p.speeds.Observe(res)
			p.served++
			rec.Cached = res.CachedTokens
			c.l.after(c.cfg.Net.Delay(t, entry, pieceBytes), func() {
				if m := c.peers[entry].mesh; m != nil {
					m.MarkSuccess(p.id)
				}
				rec.Done = c.l.now
				c.complete(rec.ID)
			})
		})
	})
}

// serve runs the request on the entry peer's engine.
func (c *Cluster) serve(rec *Record, at int) {
	rq := &c.w.Requests[rec.ID]
	p := c.peers[at]
	rec.Server = at
	c.outstanding[at]++
	p.eng.submit(rq.Prompt, rq.Reply, func() { rec.First = c.l.now }, func(res *infer.Result) {
		c.outstanding[at]--
		p.speeds.Observe(res)
		p.served++
		rec.Cached = res.CachedTokens
		rec.Done = c.l.now
		c.complete(rec.ID)
	})
}
