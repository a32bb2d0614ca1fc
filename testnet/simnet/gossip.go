package simnet

import (
	"math/rand/v2"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// broadcast delivers a message of size bytes from peer from to every other
// live peer gossiping; peers at equal delay get it in one event.
func (c *Cluster) broadcast(from, size int, deliver func(to *peer)) {
	byDelay := map[time.Duration][]*peer{}
	var delays []time.Duration
	for _, to := range c.peers {
		if to.idx == from || !to.up || to.mesh == nil {
			continue
		}
		d := c.cfg.Net.Delay(from, to.idx, size)
		if _, ok := byDelay[d]; !ok {
			delays = append(delays, d)
		}
		byDelay[d] = append(byDelay[d], to)
	}
	for _, d := range delays { // in first-seen order: deterministic
		tos := byDelay[d]
		c.l.after(d, func() {
			for _, to := range tos {
				if to.up {
					to.gossipB += int64(size)
					deliver(to)
				}
			}
		})
	}
}

// applyDigest feeds a digest from peer src to peer to's mesh and pulls a
// snapshot over the link when the replica needs one.
func (c *Cluster) applyDigest(to *peer, src int, d *cache.Digest) {
	need, err := to.mesh.ApplyDigest(c.peers[src].id, d, wall(c.l.now))
	if err != nil {
		c.errs++
		return
	}
	if need && !to.pulling[src] {
		to.pulling[src] = true
		c.l.after(c.cfg.Net.Delay(to.idx, src, pullBytes), func() {
			s := c.peers[src]
			if !s.up {
				to.pulling[src] = false
				return
			}
			snap := cloneDigest(s.announce.Snapshot())
			size := snap.EncodedSize()
			c.l.after(c.cfg.Net.Delay(src, to.idx, size), func() {
				to.pulling[src] = false
				if !to.up {
					return
				}
				to.gossipB += int64(size + pullBytes)
				if _, err := to.mesh.ApplyDigest(s.id, snap, wall(c.l.now)); err != nil {
					c.errs++
				}
			})
		})
	}
}

// startGossip runs every peer's announce loop, each at a random phase of
// the interval (peers do not start in lockstep).
func (c *Cluster) startGossip(r *rand.Rand) {
	for _, p := range c.peers {
		if p.mesh == nil {
			continue
		}
		c.l.after(time.Duration(r.Int64N(int64(c.cfg.Announce))), func() { c.tick(p) })
	}
}

func (c *Cluster) tick(p *peer) {
	if c.done() {
		return // the run is over: let the event queue drain
	}
	if p.up {
		if err := p.announce.Step(); err != nil {
			c.errs++
		}
		p.mesh.Expire(wall(c.l.now))
	}
	c.l.after(c.cfg.Announce, func() { c.tick(p) })
}
