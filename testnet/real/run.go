package real

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/meshllm/meshllm/testnet/simnet"
	"github.com/meshllm/meshllm/testnet/workload"
)

// Config configures Run. The zero value of every field but Targets is a
// usable default.
type Config struct {
	// Targets are the peers' HTTP API base URLs ("http://127.0.0.1:8080").
	// A session that enters at peer e is sent to Targets[e % len(Targets)].
	Targets []string
	// Model is the model name requests carry; "" asks the first target.
	Model string
	// Client sends the requests; nil means a client of its own.
	Client *http.Client
	// Timeout bounds one request; 0 means 5 minutes.
	Timeout time.Duration
	// Block is the cached tokens a request needs to count as a hit; 0
	// means 16 (the digest block, the simulated harness's rule).
	Block int
	// Window > 0 reads the peers' counters every Window during the run, for
	// traffic shares over time; otherwise they are read only before and
	// after.
	Window time.Duration
	// Now and Sleep are the clock (nil: the real one). Sleep waits d or
	// until ctx ends, whichever comes first, and returns ctx's error then.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Progress, when set, is called after each request with the requests
	// finished and the total; calls are serialized.
	Progress func(done, total int)
}

// Result is one real run's metrics: the simulated harness's Result filled
// the same way (simnet.Summarize over the requests), except that Forwarded,
// MaxShare, PeakWindowShare and Shares come from the peers' counters.
type Result struct {
	simnet.Result
	// Failed counts requests that got an error; FirstError is the first.
	// They are left out of the request metrics.
	Failed     int
	FirstError string
	// Served is how many requests each target's engine finished during the
	// run, from its counters; Counted their sum, which equals the
	// successful requests unless someone else used the mesh meanwhile.
	Served  []float64
	Counted float64
	// Model is what the targets serve.
	Model ModelInfo
}

func (c *Config) withDefaults() {
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Block <= 0 {
		c.Block = 16
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run sends workload w to the running peers of cfg.Targets with w's
// arrivals (open-loop session starts, or closed-loop clients) and think
// times, waits for every reply, and returns the metrics. It fails when the
// targets cannot be read or every request failed; single failed requests
// are counted in Result.Failed.
func Run(ctx context.Context, cfg Config, w *workload.Workload) (*Result, error) {
	cfg.withDefaults()
	if len(cfg.Targets) == 0 {
		return nil, errors.New("real: no targets")
	}
	if len(w.Requests) == 0 {
		return nil, errors.New("real: empty workload")
	}
	res := &Result{}
	if cfg.Model == "" {
		m, err := Model(ctx, cfg.Client, cfg.Targets[0])
		if err != nil {
			return nil, fmt.Errorf("real: asking %s for its model: %w", cfg.Targets[0], err)
		}
		cfg.Model, res.Model = m.Name, m
	} else {
		res.Model.Name = cfg.Model
	}
	before, err := scrapeAll(ctx, cfg)
	if err != nil {
		return nil, err
	}

	d := &driver{cfg: cfg, w: w, t0: cfg.Now(), recs: make([]*simnet.Record, len(w.Requests))}
	samples := [][]Counters{before}
	stopSampling := func() {}
	if cfg.Window > 0 {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		var got [][]Counters
		go func() {
			defer close(done)
			got = d.sample(sctx)
		}()
		stopSampling = func() { cancel(); <-done; samples = append(samples, got...) }
	}
	var wg sync.WaitGroup
	if w.Clients > 0 {
		for c := range w.Clients {
			wg.Go(func() { d.client(ctx, c) })
		}
	} else {
		for s := range w.Sessions {
			wg.Go(func() { d.session(ctx, s, true) })
		}
	}
	wg.Wait()
	stopSampling()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after, err := scrapeAll(ctx, cfg)
	if err != nil {
		return nil, err
	}
	samples = append(samples, after)

	var recs []simnet.Record
	for _, r := range d.recs {
		if r != nil {
			recs = append(recs, *r)
		}
	}
	res.Failed, res.FirstError = d.failed, d.firstErr
	if len(recs) == 0 {
		return res, fmt.Errorf("real: all %d requests failed, the first with: %s", d.failed, d.firstErr)
	}
	res.Requests = len(recs)
	simnet.Summarize(&res.Result, recs, len(cfg.Targets), cfg.Block, 0)
	res.Policy = "meshllm-real"
	res.WallSeconds = cfg.Now().Sub(d.t0).Seconds()
	res.fromCounters(samples)
	return res, nil
}

// driver is one Run's request state. recs[i] is written only by the
// goroutine that sends request i; failures and progress are counted under mu.
type driver struct {
	cfg  Config
	w    *workload.Workload
	t0   time.Time
	recs []*simnet.Record

	mu       sync.Mutex
	done     int
	failed   int
	firstErr string
}

// client runs closed-loop client c's sessions back to back.
func (d *driver) client(ctx context.Context, c int) {
	for s := range d.w.Sessions {
		if d.w.Sessions[s].Client == c {
			d.session(ctx, s, false)
		}
	}
}

// session sends session s's requests one after another, each a think time
// after the previous reply; open-loop sessions first wait for their start.
func (d *driver) session(ctx context.Context, s int, openLoop bool) {
	ses := d.w.Sessions[s]
	if openLoop {
		if d.cfg.Sleep(ctx, ses.Start-d.cfg.Now().Sub(d.t0)) != nil {
			return
		}
	}
	entry := ses.Entry % len(d.cfg.Targets)
	for _, id := range ses.Requests {
		req := d.w.Requests[id]
		if d.cfg.Sleep(ctx, req.Think) != nil {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
		arrive := d.cfg.Now().Sub(d.t0)
		r, err := complete(rctx, d.cfg.Client, d.cfg.Now, d.cfg.Targets[entry], d.cfg.Model, req.Prompt, len(req.Reply))
		cancel()
		if err == nil {
			prompt := r.prompt
			if prompt <= 0 {
				prompt = len(req.Prompt)
			}
			d.recs[id] = &simnet.Record{ID: id, Entry: entry, Server: entry, Arrive: arrive,
				First: arrive + r.first, Done: arrive + r.done, Prompt: prompt, Cached: r.cached, Attempts: 1}
		}
		d.finished(err)
		if ctx.Err() != nil {
			return
		}
	}
}

func (d *driver) finished(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done++
	if err != nil {
		if d.failed == 0 {
			d.firstErr = err.Error()
		}
		d.failed++
	}
	if d.cfg.Progress != nil {
		d.cfg.Progress(d.done, len(d.w.Requests))
	}
}

// sample reads every target's counters each Window until ctx ends. A
// failed read is skipped (the window merges into the next).
func (d *driver) sample(ctx context.Context) [][]Counters {
	var out [][]Counters
	t := time.NewTicker(d.cfg.Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
			if c, err := scrapeAll(ctx, d.cfg); err == nil {
				out = append(out, c)
			}
		}
	}
}

func scrapeAll(ctx context.Context, cfg Config) ([]Counters, error) {
	out := make([]Counters, len(cfg.Targets))
	for i, t := range cfg.Targets {
		c, err := ScrapeCounters(ctx, cfg.Client, t)
		if err != nil {
			return nil, fmt.Errorf("real: reading counters: %w", err)
		}
		out[i] = c
	}
	return out, nil
}

// fromCounters sets the forwarding and traffic-share metrics from counter
// samples taken before, (optionally) during and after the run, in order.
// When the counters did not move (the targets do not route: `meshllm
// serve` peers, a local-only baseline), every request counts as served
// where it entered, as Summarize already has it.
func (r *Result) fromCounters(samples [][]Counters) {
	first, last := samples[0], samples[len(samples)-1]
	peers := len(first)
	r.Served = make([]float64, peers)
	var entered, forwarded float64
	for p := range peers {
		d := last[p].Sub(first[p])
		r.Served[p] = d.Served()
		r.Counted += d.Served()
		entered += d.Entered()
		forwarded += d.Peer
	}
	if r.Counted == 0 {
		return
	}
	r.Forwarded, r.MaxShare = 0, 0
	if entered > 0 {
		r.Forwarded = forwarded / entered
	}
	if r.Counted > 0 {
		r.MaxShare = slices.Max(r.Served) / r.Counted
	}
	r.Shares, r.PeakWindowShare = windowShares(samples)
	if len(samples) > 2 && r.VirtualSeconds > 0 {
		r.WindowSeconds = r.VirtualSeconds / float64(len(samples)-1)
	} else {
		r.WindowSeconds = r.VirtualSeconds
	}
}

// windowShares returns each window's traffic share per peer (windows lie
// between consecutive samples) and the largest share in a window that
// served enough requests to say something about balance (the simulated
// harness's rule: 4 per peer, or 20).
func windowShares(samples [][]Counters) (shares [][]float64, peak float64) {
	for w := 1; w < len(samples); w++ {
		peers := len(samples[w])
		row := make([]float64, peers)
		tot := 0.0
		for p := range peers {
			row[p] = samples[w][p].Sub(samples[w-1][p]).Served()
			tot += row[p]
		}
		if tot > 0 {
			for p := range row {
				row[p] /= tot
			}
		}
		shares = append(shares, row)
		if tot >= float64(4*peers) || tot >= 20 {
			peak = max(peak, slices.Max(row))
		}
	}
	return shares, peak
}
