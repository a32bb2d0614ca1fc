package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node/forward"
	"github.com/prometheus/client_golang/prometheus"
)

// Forwarder sends a request to another peer and streams the reply back;
// the p2p layer implements it over /meshllm/infer/1.0.0. The peer serves
// it with its ServeForwarded (hop limit 1: never forwarded again).
//
// Forward follows infer.Engine.Generate's contract: it blocks until the
// reply is complete or fails, calls emit in order from one goroutine,
// stops when ctx is cancelled (resetting the stream) or when emit fails
// (returning emit's error, wrapped or not), and returns errors wrapping
// infer's typed errors where the peer sent one (infer.ErrBusy for a busy
// answer). estimatedCached is the router's estimate of the peer's match,
// sent along for the peer's logs. Implementations must be safe for
// concurrent use.
type Forwarder interface {
	Forward(ctx context.Context, peer PeerID, req infer.Request, estimatedCached int, emit func(infer.Piece) error) (*infer.Result, error)
}

// RouterConfig configures a Router.
type RouterConfig struct {
	// Engine is the local engine (required).
	Engine infer.Engine
	// Mesh is the view of the other peers (required); its Policy is the
	// router's.
	Mesh *Mesh
	// Forwarder sends requests to peers; nil serves everything locally.
	Forwarder Forwarder
	// Speeds measures the local engine; nil makes a new one. Share it with
	// the Announce loop so that the advertised speeds are the measured ones.
	Speeds *Speeds
	// Registry receives the router's collectors; nil registers none.
	Registry *prometheus.Registry
	// Logger receives one record per decision at Debug level and every
	// fallback at Info; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Recent is how many decisions the ring buffer keeps; 0 means 256.
	Recent int
	// Trust judges each forward's result against the peer's claims and
	// scales what distrusted peers claim (see Trust); nil means a new one
	// with DefaultTrustConfig. Share it with the gossip score.
	Trust *Trust
	// NoTrust turns trust off: every peer's claims are taken as they come.
	NoTrust bool
	// Forward is where this peer's own requests may be served; a
	// request's policy on its context (forward.WithPolicy) narrows it,
	// never widens it. Unset means forward.Any. See forwardPolicy.
	Forward forward.Policy
	// Members reports whether a peer is a proven member of the private
	// mesh (p2p.Membership.IsMember); under forward.Members only those
	// are candidates. nil means no membership (an open mesh): Members
	// then admits no one. Must be safe for concurrent use.
	Members func(PeerID) bool
	// Scorer spot-checks completed forwarded replies (Policy.VerifyFraction
	// of them; see verify_router.go); nil means the Engine when it is an
	// infer.Scorer, and no checks otherwise.
	Scorer infer.Scorer
	// VerifyBounds are the limits a checked reply must keep; the zero
	// value means DefaultVerifyBounds.
	VerifyBounds VerifyBounds
	// VerifyRand draws in [0, 1) whether to check a reply; nil means
	// math/rand/v2. Must be safe for concurrent use.
	VerifyRand func() float64
}

// Router is the mesh router: an httpapi.Generator that serves each request locally
// or on the peer where it is expected to finish first (see Decide), and
// falls back to the next peer, then local, when a forward fails, so that
// the client never sees a peer's failure. Peers the request's forward
// policy excludes (RouterConfig.Forward narrowed by the request's context;
// forward_policy.go) are removed from the view before Decide: they are
// neither chosen nor tried as fallbacks.
//
// Failure policy:
//
//   - before the first piece reached the client (busy, error, timeout,
//     reset, a first piece out of the request's bounds): the next
//     candidate is tried, then the local engine serves the original
//     request; a refusal (bad request, context overflow) goes to the local
//     engine at once;
//   - after some pieces reached the client: the local engine continues the
//     reply. The router buffers nothing; it remembers the text already
//     emitted, tokenizes it, and generates locally with the prompt
//     extended by those tokens and MaxTokens reduced by the tokens already
//     sent, so the client sees one reply. The continuation is a plausible
//     reply, not the one the peer would have finished (sampling restarts
//     from the local engine's state; a stop string split across the seam
//     is not detected).
//
// A busy answer puts the peer on Policy.PushBackCooldown; any other
// failure (an error, a timeout, a reply out of the request's bounds, a
// refusal of a request the local engine serves) on the doubling failure
// cooldown, and counts against the peer's trust (see Trust). A refusal
// of a request the local engine refuses too blames nobody. A request that
// fails locally fails with the local error.
//
// Router is safe for concurrent use: it holds no lock while generating;
// the Mesh, Speeds, ring buffer and collectors synchronize themselves.
type Router struct {
	eng    infer.Engine
	info   infer.ModelInfo
	mesh   *Mesh
	fwd    Forwarder
	policy Policy
	speeds *Speeds
	log    *slog.Logger
	now    func() time.Time
	met    *routerMetrics
	recent *recent
	trust  *Trust         // nil: off
	ver    *verifier      // nil: no spot checks (verify_router.go)
	emb    infer.Embedder // nil: none

	fwdPolicy forward.Policy    // RouterConfig.Forward (forward_policy.go)
	isMember  func(PeerID) bool // RouterConfig.Members; nil: no membership
}

// NewRouter returns a router; it registers its collectors on
// cfg.Registry.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Engine == nil || cfg.Mesh == nil {
		return nil, fmt.Errorf("node: RouterConfig needs Engine and Mesh")
	}
	if cfg.Speeds == nil {
		cfg.Speeds = NewSpeeds(0, 0, 0)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recent <= 0 {
		cfg.Recent = 256
	}
	met, err := newRouterMetrics(cfg.Registry, cfg.Mesh)
	if err != nil {
		return nil, err
	}
	if cfg.Trust == nil && !cfg.NoTrust {
		if cfg.Trust, err = NewTrust(DefaultTrustConfig()); err != nil {
			return nil, err
		}
	}
	if cfg.NoTrust {
		cfg.Trust = nil
	}
	if cfg.Trust != nil {
		cfg.Mesh.SetTrust(cfg.Trust) // the view's eviction order ranks by trust
	}
	emb, _ := cfg.Engine.(infer.Embedder)
	if cfg.Scorer == nil {
		cfg.Scorer, _ = cfg.Engine.(infer.Scorer)
	}
	if cfg.VerifyBounds == (VerifyBounds{}) {
		cfg.VerifyBounds = DefaultVerifyBounds()
	}
	if err := cfg.VerifyBounds.Validate(); err != nil {
		return nil, err
	}
	return &Router{
		eng: cfg.Engine, info: cfg.Engine.Info(), mesh: cfg.Mesh, fwd: cfg.Forwarder,
		policy: cfg.Mesh.Policy(), speeds: cfg.Speeds, log: cfg.Logger, now: cfg.Now,
		met: met, recent: newRecent(cfg.Recent), trust: cfg.Trust, emb: emb,
		ver:       newVerifier(cfg.Scorer, cfg.Mesh.Policy().VerifyFraction, cfg.VerifyBounds, cfg.VerifyRand),
		fwdPolicy: cfg.Forward, isMember: cfg.Members,
	}, nil
}

// Info implements httpapi.Generator.
func (r *Router) Info() infer.ModelInfo { return r.info }

// Tokenize implements httpapi.Generator with the local engine's tokenizer (every
// peer of a mesh serves the same model, so tokens are valid everywhere).
func (r *Router) Tokenize(text string) ([]int32, error) { return r.eng.Tokenize(text) }

// Render implements httpapi.Generator with the local engine's template.
func (r *Router) Render(messages []infer.Message, tools []infer.Tool) (string, error) {
	return r.eng.Render(messages, tools)
}

// Embed implements infer.Embedder with the local engine (when it is an
// infer.Embedder): embeddings are never forwarded, they are cheap next to
// a round trip and nothing of them is cached. A separate embedding model
// (with its own tokenizer) is mounted on the HTTP API instead.
func (r *Router) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if r.emb == nil {
		return nil, fmt.Errorf("%w: this peer serves no embeddings (start it with --embed-model)", infer.ErrUnsupported)
	}
	return r.emb.Embed(ctx, inputs)
}

// Stats implements httpapi.Generator: the local engine's stats.
func (r *Router) Stats() infer.Stats { return r.eng.Stats() }

// Mesh returns the router's mesh.
func (r *Router) Mesh() *Mesh { return r.mesh }

// Speeds returns the router's local speed meter.
func (r *Router) Speeds() *Speeds { return r.speeds }

// Recent returns the latest decisions, oldest first.
func (r *Router) Recent() []DecisionRecord { return r.recent.list() }

// LocalView returns the local engine's state for prompt.
func (r *Router) LocalView(prompt []int32) LocalView {
	st := r.eng.Stats()
	pf, dc := r.speeds.Get()
	return LocalView{
		Cached: r.eng.CachedPrefix(prompt), QueueDepth: st.Queued, Active: st.Active, Slots: st.Slots,
		PrefillTokPerSec: pf, DecodeTokPerSec: dc,
	}
}

// Generate implements httpapi.Generator: decide, then serve locally or forward
// with fallback (see Router).
func (r *Router) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	if err := infer.Validate(req, r.info); err != nil {
		return nil, err // a bad request is refused here, never forwarded
	}
	start := r.now()
	v := View{Now: start, Local: r.LocalView(req.Prompt)}
	if r.fwd != nil {
		v = r.trustView(r.mesh.View(req.Prompt, v.Local, start))
	}
	fp := r.forwardPolicy(ctx)
	excluded := r.applyForwardPolicy(fp, &v) // peers the request may not go to are no candidates
	d := Decide(Route{PromptTokens: len(req.Prompt), MaxTokens: req.Sampling.MaxTokens}, v, r.policy)
	if d.Local && excluded > 0 && len(v.Peers) == 0 {
		d.Reason = ReasonForwardPolicy
	}
	r.met.decideSeconds.Observe(r.now().Sub(start).Seconds())
	r.met.decisions.WithLabelValues(string(d.Reason)).Inc()
	r.met.pushBackSkips.Add(float64(d.PushBackSkips))
	rec := DecisionRecord{
		Time: start, PromptTokens: len(req.Prompt), MaxTokens: req.Sampling.MaxTokens, Reason: d.Reason, Forward: fp,
		Chosen: d.Peer, Fallbacks: d.Fallbacks, EstimatedCached: d.EstimatedCached,
		LocalCostMillis: *millis(d.LocalCost),
	}
	if d.PeerCost > 0 {
		rec.PeerCostMillis = *millis(d.PeerCost)
	}
	res, err := r.execute(ctx, req, d, emit, &rec)
	rec.DurationMillis = *millis(r.now().Sub(start))
	if err != nil {
		rec.Err = err.Error()
	} else {
		rec.RealizedCached = res.CachedTokens
	}
	r.recent.add(rec)
	r.log.Debug("route", "reason", d.Reason, "prompt", rec.PromptTokens, "chosen", d.Peer,
		"served_by", rec.ServedBy, "continued", rec.Continued, "attempts", len(rec.Attempts),
		"local_cost", d.LocalCost, "peer_cost", d.PeerCost,
		"estimated_cached", rec.EstimatedCached, "realized_cached", rec.RealizedCached, "err", rec.Err)
	return res, err
}

// execute carries a decision out.
func (r *Router) execute(ctx context.Context, req infer.Request, d Decision, emit func(infer.Piece) error, rec *DecisionRecord) (*infer.Result, error) {
	if d.Local {
		return r.serveLocal(ctx, req, emit, d.EstimatedCached)
	}
	st := &stream{emit: emit, start: r.now(), now: r.now}
	var refused *Candidate // refused the request before its first piece
	var refusedAt time.Time
	for _, c := range d.Candidates {
		began := r.now()
		res, out, err := r.forward(ctx, c, req, st)
		rec.Attempts = append(rec.Attempts, Attempt{Peer: c.Peer, Outcome: out, Pieces: st.piecesOf(c.Peer), Err: errString(err)})
		switch out {
		case outcomeServed:
			r.judge(c, res, out, began)
			r.mesh.MarkSuccess(c.Peer)
			r.maybeVerify(c.Peer, req, st.text.String()) // after the fact: the client has the reply
			r.met.served.WithLabelValues("peer").Inc()
			r.met.cached("peer", c.EstimatedCached, res.CachedTokens)
			rec.ServedBy, rec.EstimatedCached = c.Peer, c.EstimatedCached
			return res, nil
		case outcomeClient:
			return nil, err
		}
		stage := "before-first-piece"
		if st.pieces > 0 {
			stage = "mid-stream"
		}
		r.met.fallbacks.WithLabelValues(out, stage).Inc()
		r.log.Info("forward failed; falling back", "peer", c.Peer, "outcome", out, "stage", stage, "err", err)
		if out == outcomeRejected && st.pieces == 0 {
			// The peer found the request bad. Generate validated it, but
			// only an engine knows some refusals (a schema its grammar
			// cannot hold): the local engine serves it, and the peer is
			// blamed only if that engine accepts it (see below).
			refused, refusedAt = &c, began
			break
		}
		r.judge(c, res, out, began)
		if out == outcomeBusy {
			r.mesh.MarkBusy(c.Peer, r.now())
		} else {
			r.mesh.MarkFailure(c.Peer, r.now())
		}
		if st.pieces > 0 {
			break
		}
	}
	if st.pieces == 0 {
		if refused == nil {
			return r.serveLocal(ctx, req, emit, r.eng.CachedPrefix(req.Prompt))
		}
		accepted := false // the local engine served the request, or began to
		res, err := r.serveLocal(ctx, req, func(p infer.Piece) error {
			accepted = true
			return emit(p)
		}, r.eng.CachedPrefix(req.Prompt))
		if err == nil || accepted {
			// A request this peer's own engine serves was refused: the
			// refusing peer is at fault. Otherwise nobody is: the request
			// was bad, or the client left before the engine said.
			r.judge(*refused, nil, outcomeRejected, refusedAt)
			r.mesh.MarkFailure(refused.Peer, r.now())
		}
		return res, err
	}
	rec.Continued = true
	return r.continueLocal(ctx, req, st)
}

// serveLocal runs req on the local engine and measures it.
func (r *Router) serveLocal(ctx context.Context, req infer.Request, emit func(infer.Piece) error, estCached int) (*infer.Result, error) {
	res, err := r.eng.Generate(ctx, req, emit)
	if err != nil {
		return nil, err
	}
	r.speeds.Observe(res)
	r.met.served.WithLabelValues("local").Inc()
	r.met.cached("local", estCached, res.CachedTokens)
	return res, nil
}

// ServeForwarded serves a request another peer forwarded here: locally
// only (hop limit 1), and refused with an error wrapping infer.ErrBusy
// when more than Policy.BusyQueueThreshold requests are queued, so that
// the origin tries elsewhere instead of queueing behind them.
func (r *Router) ServeForwarded(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	if st := r.eng.Stats(); st.Queued > r.policy.BusyQueueThreshold {
		r.met.forwardedIn.WithLabelValues("busy").Inc()
		return nil, fmt.Errorf("%w: %d requests queued, threshold %d", infer.ErrBusy, st.Queued, r.policy.BusyQueueThreshold)
	}
	res, err := r.eng.Generate(ctx, req, emit)
	if err != nil {
		outcome := "error"
		if errors.Is(err, infer.ErrBusy) {
			outcome = "busy"
		}
		r.met.forwardedIn.WithLabelValues(outcome).Inc()
		return nil, err
	}
	r.speeds.Observe(res)
	r.met.forwardedIn.WithLabelValues("served").Inc()
	return res, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
