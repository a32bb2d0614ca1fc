package vtmesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meshllm/meshllm/cache"
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/testnet/simnet"
	"github.com/meshllm/meshllm/testnet/workload"
)

// Run drives w through the cluster — each session's requests enter at its
// entry peer's Router, open loop from the session's start or closed loop
// per client, a think time after the previous reply — and returns the
// metrics of package simnet (simnet.Summarize over one Record per request,
// gossip bytes from the GossipSub topics). Every request should succeed:
// failures (and failed churn events) are returned, joined, with the metrics
// of the requests that did. Call it inside the cluster's synctest bubble;
// it returns when every request has finished and every churn event has
// happened.
func (c *Cluster) Run(ctx context.Context, w *workload.Workload) (*simnet.Result, error) {
	for _, s := range w.Sessions {
		if s.Entry >= len(c.peers) {
			return nil, fmt.Errorf("vtmesh: session enters at peer %d of %d", s.Entry, len(c.peers))
		}
	}
	gossipBefore := c.gossipBytes()
	d := &driver{c: c, w: w, t0: time.Now(), recs: make([]simnet.Record, len(w.Requests)), ok: make([]bool, len(w.Requests))}
	var churn sync.WaitGroup
	for _, ch := range c.cfg.Churn {
		churn.Go(func() {
			time.Sleep(ch.At)
			var err error
			if ch.Up {
				err = c.start(ch.Peer)
			} else {
				err = c.stop(ch.Peer)
			}
			if err != nil {
				d.fail(fmt.Errorf("churn %+v: %w", ch, err))
			}
		})
	}
	var wg sync.WaitGroup
	if w.Clients > 0 {
		for cl := range w.Clients {
			wg.Go(func() {
				for s := range w.Sessions {
					if w.Sessions[s].Client == cl {
						d.session(ctx, s, false)
					}
				}
			})
		}
	} else {
		for s := range w.Sessions {
			wg.Go(func() { d.session(ctx, s, true) })
		}
	}
	wg.Wait()
	churn.Wait()
	r := &simnet.Result{Policy: c.policyName()}
	var recs []simnet.Record
	for i, rc := range d.recs {
		if d.ok[i] {
			recs = append(recs, rc)
		}
	}
	simnet.Summarize(r, recs, len(c.peers), cache.DefaultBlockSize, 0)
	r.Requests, r.Records = len(recs), recs
	if r.VirtualSeconds > 0 {
		r.GossipBytesPerPeerSec = float64(c.gossipBytes()-gossipBefore) / float64(len(c.peers)) / r.VirtualSeconds
	}
	return r, errors.Join(d.errs...)
}

func (c *Cluster) policyName() string {
	if c.cfg.Forward {
		return "meshllm"
	}
	return "local"
}

// gossipBytes is the topic payload bytes the current peers have received.
func (c *Cluster) gossipBytes() int64 {
	var n int64
	for _, p := range c.Peers() {
		n += p.Gossip.Stats().BytesIn
	}
	return n
}

// entry returns the live peer a request for peer i enters at: i, or the
// next live one after it (its users reconnect elsewhere); -1 if none is up.
func (c *Cluster) entry(i int) (int, *Peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.peers {
		if j := (i + k) % len(c.peers); c.up[j] {
			return j, c.peers[j]
		}
	}
	return -1, nil
}

// driver sends a workload's requests and keeps their records.
type driver struct {
	c  *Cluster
	w  *workload.Workload
	t0 time.Time

	mu   sync.Mutex
	recs []simnet.Record
	ok   []bool // recs[i] holds a served request
	errs []error
}

// session sends session s's requests one after another; open-loop
// sessions first wait for their start.
func (d *driver) session(ctx context.Context, s int, openLoop bool) {
	ses := d.w.Sessions[s]
	if openLoop {
		time.Sleep(ses.Start - time.Since(d.t0))
	}
	for _, id := range ses.Requests {
		req := d.w.Requests[id]
		time.Sleep(req.Think)
		if err := d.send(ctx, ses.Entry, req); err != nil {
			d.fail(fmt.Errorf("request %d: %w", id, err))
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (d *driver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

// send runs one request through the entry peer's Router (the next live
// peer's while it is down).
func (d *driver) send(ctx context.Context, entry int, req workload.Request) error {
	entry, p := d.c.entry(entry)
	if p == nil {
		return fmt.Errorf("no peer is up")
	}
	tr := &served{server: -1}
	rctx := context.WithValue(ctx, servedKey{}, tr)
	arrive := time.Since(d.t0)
	var first time.Duration
	res, err := p.Router.Generate(rctx, infer.Request{Prompt: req.Prompt,
		Sampling: infer.Sampling{MaxTokens: len(req.Reply), Temperature: 0}},
		func(infer.Piece) error {
			if first == 0 {
				first = time.Since(d.t0)
			}
			return nil
		})
	if err != nil {
		return err
	}
	server := entry
	if tr.server >= 0 {
		server = tr.server
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ok[req.ID] = true
	d.recs[req.ID] = simnet.Record{ID: req.ID, Entry: entry, Server: server,
		Arrive: arrive, First: first, Done: time.Since(d.t0),
		Prompt: res.PromptTokens, Cached: res.CachedTokens,
		Forwarded: tr.server >= 0, Attempts: tr.attempts}
	return nil
}
