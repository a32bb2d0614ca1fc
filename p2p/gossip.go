package p2p

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/meshllm/meshllm/cache"
)

// TopicName is the GossipSub topic of a model: meshllm/model/<modelID>/1.
// The trailing number is the topic's message format version.
func TopicName(modelID string) string { return "meshllm/model/" + modelID + "/1" }

// GossipOptions tunes a Gossip; the zero value of each field selects the
// default in its comment.
type GossipOptions struct {
	// MaxMessageBytes bounds a topic message; larger ones are rejected
	// (default 512 KiB: four times a snapshot at the default digest cap).
	MaxMessageBytes int
	// MaxAuthors bounds the authors whose freshness a topic remembers
	// (default 4096); the least recently heard from is forgotten first.
	MaxAuthors int
	// BufferSize is the per-topic queue of delivered messages (default 256);
	// when the reader falls behind, pubsub drops messages (the anti-entropy
	// pull repairs digests, the next announcement repairs loads).
	BufferSize int
	// NoScoring turns peer scoring off (tests of the validator alone).
	NoScoring bool
	// MaxRelayedStrangers is the relay quota: how many distinct authors
	// that are not connected topic members (whose messages the validator
	// ignores) one peer may forward per RelayWindow before RelayPenalty
	// is taken off its application score for a window (defaults:
	// DefaultMaxRelayedStrangers, DefaultRelayWindow,
	// DefaultRelayPenalty). The penalty needs scoring.
	MaxRelayedStrangers int
	RelayWindow         time.Duration
	RelayPenalty        float64
	// Now is the relay quota's clock (nil: time.Now).
	Now func() time.Time
	// Introduce, when set, is called with the author of a message a
	// connected member relayed while that relay was within its quota, but
	// that is not itself a member: a real peer of the topic this host is
	// not connected to yet. It should dial the author (Host.Introduce
	// does: a DHT lookup, bounded and backed off per author), so that its
	// next messages are heard first-hand; a made-up identity costs one
	// failed lookup. It runs on a validation worker: it must not block.
	Introduce func(peer.ID)
	// AppScore is the application-specific score (P5, weight 1) of each
	// peer: the node's trust in it, membership (see AppScores); nil means
	// 0 for every peer. The relay quota's penalty is added to it. It is
	// called from GossipSub's scoring with its lock held: it must be fast
	// and must not call into the Gossip.
	AppScore func(peer.ID) float64
	// PubSubOptions are appended to the options this package sets.
	PubSubOptions []pubsub.Option
}

// GossipStats counts topic traffic over all joined topics.
type GossipStats struct {
	MessagesIn  int64 // messages delivered to Next (other authors only)
	BytesIn     int64 // their payload bytes
	MessagesOut int64 // messages published
	BytesOut    int64 // their payload bytes (each peer that relays sends them again)
	Rejected    int64 // messages the validator rejected (malformed, oversize, forged)
	Ignored     int64 // messages the validator ignored (stale, replayed, strangers)
	// Strangers counts the ignored messages whose author is not a
	// connected topic member (made-up identities, or peers too far away).
	Strangers int64
}

// Gossip runs GossipSub on a host with strict message signing (the
// default: every message carries its author's signature, so
// pubsub.Message.GetFrom is authenticated) and peer scoring. Its methods
// are safe for concurrent use.
//
// Only connected members are heard: a message is delivered (and relayed
// on) only when its author is this host or a peer this host is connected
// to and that is subscribed to the topic; any other author's messages are
// ignored, however they arrive. A peer ID costs nothing to make, a
// connection does (the connection manager and resource manager bound
// them), so a flood of made-up identities through one peer reaches no
// view. Authors publish to every connected topic peer themselves (flood
// publishing), so every peer that accepts an author's messages gets them
// first-hand; relays only add redundancy. A relay that forwards too many
// distinct strangers is penalized (GossipOptions.MaxRelayedStrangers).
type Gossip struct {
	h      host.Host
	ps     *pubsub.PubSub
	opts   GossipOptions
	cancel context.CancelFunc
	relays *relayQuota

	mu     sync.Mutex
	topics map[string]*Topic

	msgsIn, bytesIn, msgsOut, bytesOut, rejected, ignored, strangers atomic.Int64
}

// NewGossip starts GossipSub on h. It runs until ctx ends or Close.
func NewGossip(ctx context.Context, h host.Host, opts GossipOptions) (*Gossip, error) {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 512 << 10
	}
	if opts.MaxAuthors <= 0 {
		opts.MaxAuthors = 4096
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = 256
	}
	if opts.MaxRelayedStrangers <= 0 {
		opts.MaxRelayedStrangers = DefaultMaxRelayedStrangers
	}
	if opts.RelayWindow <= 0 {
		opts.RelayWindow = DefaultRelayWindow
	}
	if opts.RelayPenalty <= 0 {
		opts.RelayPenalty = DefaultRelayPenalty
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	relays := newRelayQuota(opts)
	app := opts.AppScore
	score := func(p peer.ID) float64 {
		s := relays.Score(p)
		if app != nil {
			s += app(p)
		}
		return s
	}
	ctx, cancel := context.WithCancel(ctx)
	po := []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		// Flood publishing (off by default in this pubsub version): the
		// author sends its own messages to every topic peer whose score is
		// above the publish threshold, not only to its mesh. On a low-rate
		// topic this costs little, halves the latency of a digest, and
		// delivers messages published before the first heartbeat has
		// grafted a mesh (pubsub#331); relays still use the mesh.
		pubsub.WithFloodPublish(true),
		// Let messages somewhat above our limit reach the validator, so that
		// their sender is penalized, not just dropped by the RPC reader.
		pubsub.WithMaxMessageSize(max(opts.MaxMessageBytes+64<<10, 1<<20)),
	}
	if !opts.NoScoring {
		po = append(po, pubsub.WithPeerScore(scoreParams(score), scoreThresholds()))
	}
	po = append(po, opts.PubSubOptions...)
	ps, err := pubsub.NewGossipSub(ctx, h, po...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("p2p: start gossipsub: %w", err)
	}
	return &Gossip{h: h, ps: ps, opts: opts, cancel: cancel, relays: relays, topics: map[string]*Topic{}}, nil
}

// Close leaves every topic and stops GossipSub.
func (g *Gossip) Close() error {
	g.mu.Lock()
	ts := make([]*Topic, 0, len(g.topics))
	for _, t := range g.topics {
		ts = append(ts, t)
	}
	g.mu.Unlock()
	for _, t := range ts {
		_ = t.Close()
	}
	g.cancel()
	return nil
}

// Stats returns the traffic counters.
func (g *Gossip) Stats() GossipStats {
	return GossipStats{
		MessagesIn: g.msgsIn.Load(), BytesIn: g.bytesIn.Load(),
		MessagesOut: g.msgsOut.Load(), BytesOut: g.bytesOut.Load(),
		Rejected: g.rejected.Load(), Ignored: g.ignored.Load(), Strangers: g.strangers.Load(),
	}
}

// Join subscribes to the topic of modelID with its validator and score
// parameters. A model can be joined once at a time.
func (g *Gossip) Join(modelID string) (*Topic, error) {
	if modelID == "" || len(modelID) > cache.MaxModelLen {
		return nil, fmt.Errorf("p2p: model ID of %d bytes", len(modelID))
	}
	name := TopicName(modelID)
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.topics[modelID]; ok {
		return nil, fmt.Errorf("p2p: topic %s already joined", name)
	}
	t := &Topic{g: g, model: modelID, name: name, self: g.h.ID(), fresh: newFreshness(g.opts.MaxAuthors)}
	if err := g.ps.RegisterTopicValidator(name, t.validate, pubsub.WithValidatorInline(true)); err != nil {
		return nil, fmt.Errorf("p2p: validator for %s: %w", name, err)
	}
	pt, err := g.ps.Join(name)
	if err != nil {
		_ = g.ps.UnregisterTopicValidator(name)
		return nil, fmt.Errorf("p2p: join %s: %w", name, err)
	}
	if !g.opts.NoScoring {
		if err := pt.SetScoreParams(topicScoreParams()); err != nil {
			_ = pt.Close()
			_ = g.ps.UnregisterTopicValidator(name)
			return nil, fmt.Errorf("p2p: score parameters for %s: %w", name, err)
		}
	}
	sub, err := pt.Subscribe(pubsub.WithBufferSize(g.opts.BufferSize))
	if err != nil {
		_ = pt.Close()
		_ = g.ps.UnregisterTopicValidator(name)
		return nil, fmt.Errorf("p2p: subscribe %s: %w", name, err)
	}
	t.topic, t.sub = pt, sub
	g.topics[modelID] = t
	return t, nil
}

// Message is a validated topic message from another peer: exactly one of
// Digest and Load is set.
type Message struct {
	// From is the authenticated author (the signer), which the validator
	// checked against the peer named inside the message.
	From peer.ID
	// ReceivedFrom is the peer that relayed it (the last hop).
	ReceivedFrom peer.ID
	Digest       *cache.Digest
	Load         *Load
	Size         int // payload bytes
}

// Topic is a joined model topic. Publish methods and Next are safe for
// concurrent use; Next is meant for one reader goroutine.
type Topic struct {
	g     *Gossip
	model string
	name  string
	self  peer.ID
	topic *pubsub.Topic
	sub   *pubsub.Subscription

	mu     sync.Mutex // guards fresh and closed
	fresh  *freshness
	closed bool
}

// Model returns the topic's model ID.
func (t *Topic) Model() string { return t.model }

// Peers returns the peers known to be subscribed to the topic.
func (t *Topic) Peers() []peer.ID { return t.topic.ListPeers() }

// PublishDigest publishes a snapshot or delta of the local cache. d.Peer
// must be this host's ID (peer.ID.String()) and d.Model the topic's model.
func (t *Topic) PublishDigest(ctx context.Context, d *cache.Digest) error {
	if d.Peer != t.self.String() || d.Model != t.model {
		return fmt.Errorf("%w: digest of peer %q model %q on %s", ErrForged, d.Peer, d.Model, t.name)
	}
	b, err := d.MarshalBinary()
	if err != nil {
		return err
	}
	return t.publish(ctx, b)
}

// PublishLoad publishes a load announcement; an empty l.Peer is set to this
// host's ID, any other must equal it.
func (t *Topic) PublishLoad(ctx context.Context, l *Load) error {
	if l.Peer == "" {
		c := *l
		c.Peer = t.self
		l = &c
	}
	if l.Peer != t.self {
		return fmt.Errorf("%w: load of peer %s on %s", ErrForged, l.Peer, t.name)
	}
	return t.publish(ctx, l.AppendBinary(nil))
}

func (t *Topic) publish(ctx context.Context, b []byte) error {
	if len(b) > t.g.opts.MaxMessageBytes {
		return fmt.Errorf("%w: message of %d bytes, limit %d", ErrFrameTooLarge, len(b), t.g.opts.MaxMessageBytes)
	}
	if err := t.topic.Publish(ctx, b); err != nil {
		return fmt.Errorf("p2p: publish on %s: %w", t.name, err)
	}
	t.g.msgsOut.Add(1)
	t.g.bytesOut.Add(int64(len(b)))
	return nil
}

// Next returns the next validated message from another peer; it blocks
// until one arrives, ctx ends, or the topic is closed.
func (t *Topic) Next(ctx context.Context) (*Message, error) {
	for {
		m, err := t.sub.Next(ctx)
		if err != nil {
			return nil, err
		}
		from := m.GetFrom()
		if from == t.self || m.Local {
			continue
		}
		out := &Message{From: from, ReceivedFrom: m.ReceivedFrom, Size: len(m.Data)}
		switch v := m.ValidatorData.(type) {
		case *cache.Digest:
			out.Digest = v
		case *Load:
			out.Load = v
		default:
			continue
		}
		t.g.msgsIn.Add(1)
		t.g.bytesIn.Add(int64(len(m.Data)))
		return out, nil
	}
}

// Close leaves the topic; Next returns an error afterwards.
func (t *Topic) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.sub.Cancel()
	err := t.topic.Close()
	_ = t.g.ps.UnregisterTopicValidator(t.name)
	t.g.mu.Lock()
	delete(t.g.topics, t.model)
	t.g.mu.Unlock()
	return err
}

// digestMagic starts every encoded cache.Digest.
const digestMagic = "md"

func hasMagic(b []byte, magic string) bool { return len(b) >= 2 && string(b[:2]) == magic }

// validate is the topic validator: oversize, malformed or forged (the peer
// named inside differs from the signer, or another model) -> reject; an
// author that is not a connected topic member (see Topic.member; counted
// against the relay's quota), stale or replayed -> ignore; else accept,
// with the decoded value attached. Ignoring strangers rather than
// rejecting them spares an honest relay the penalty for invalid messages:
// in a mesh that is not fully connected it forwards authors we lack.
func (t *Topic) validate(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	res := t.decide(m)
	switch res {
	case pubsub.ValidationReject:
		t.g.rejected.Add(1)
	case pubsub.ValidationIgnore:
		t.g.ignored.Add(1)
	}
	return res
}

func (t *Topic) decide(m *pubsub.Message) pubsub.ValidationResult {
	data := m.Data
	if len(data) > t.g.opts.MaxMessageBytes {
		return pubsub.ValidationReject
	}
	author := m.GetFrom()
	if author == "" {
		return pubsub.ValidationReject
	}
	if !t.member(author) {
		t.g.strangers.Add(1)
		if over := t.g.relays.stranger(m.ReceivedFrom, author); !over && t.g.opts.Introduce != nil {
			t.g.opts.Introduce(author)
		}
		return pubsub.ValidationIgnore
	}
	switch {
	case hasMagic(data, digestMagic):
		d, err := cache.Decode(data)
		if err != nil || d.Peer != author.String() || d.Model != t.model {
			return pubsub.ValidationReject
		}
		t.mu.Lock()
		fresh := t.fresh.digest(author, m.GetSeqno(), d)
		t.mu.Unlock()
		if !fresh {
			return pubsub.ValidationIgnore
		}
		m.ValidatorData = d
	case hasMagic(data, loadMagic):
		l, err := DecodeLoad(data)
		if err != nil || l.Peer != author {
			return pubsub.ValidationReject
		}
		t.mu.Lock()
		fresh := t.fresh.load(author, m.GetSeqno(), l)
		t.mu.Unlock()
		if !fresh {
			return pubsub.ValidationIgnore
		}
		m.ValidatorData = l
	default:
		return pubsub.ValidationReject
	}
	return pubsub.ValidationAccept
}
