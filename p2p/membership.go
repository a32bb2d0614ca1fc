package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MembershipConfig configures a Membership; zero fields take the default
// in their comment.
type MembershipConfig struct {
	// Key is the mesh key, shared out of band by the mesh's members:
	// MeshKeyLen bytes, from a key file (ParseMeshKey) or derived from a
	// passphrase (MeshKeyFromPassphrase). Empty means no handshake:
	// membership is the Gater's allowlist alone.
	Key []byte
	// Gater, when set, blocks the peers that fail the handshake (so they
	// cannot reconnect for BlockFor), and its allowlist, if any, must also
	// list a member. Give the same Gater to Config.ConnectionGater.
	Gater *Gater
	// HandshakeTimeout bounds the handshake: a peer that has not proven
	// membership this long after connecting is disconnected and blocked
	// (default 10 s).
	HandshakeTimeout time.Duration
	// BlockFor is how long a peer that failed stays blocked (default 10
	// min).
	BlockFor time.Duration
	// OutsiderScore is the GossipSub application score (AppScore) of a
	// connected peer that is not a member yet (default -1000: below the
	// graylist threshold, so its gossip is dropped unread and nothing is
	// published to it).
	OutsiderScore float64
	// Logger receives one record per refused peer; nil discards.
	Logger *slog.Logger
}

// MembershipStats counts handshakes.
type MembershipStats struct {
	Members  int   // peers proven now
	Verified int64 // handshakes that succeeded
	Refused  int64 // peers disconnected for failing or not answering
}

// Membership keeps a private mesh private: it tells members from
// outsiders, and refuses outsiders everything the mesh offers.
//
// With a Key, every new connection runs a challenge-response over
// MemberProtocol, started by the side that dialed: both sides send a
// fresh nonce, then the dialer proves it holds the key (an HMAC-SHA256,
// keyed by a subkey of the mesh key, over the protocol ID, its role, both
// peer IDs as the secure channel authenticated them and both nonces); the
// listener checks that proof before it sends its own. A listener thus
// reveals nothing keyed by the mesh key to a dialer that does not hold it
// (no proof to grind offline); a dialer reveals its proof to whoever it
// dials (see docs/security.md). Each side counts the other a member once
// its proof checked. A peer that sends a wrong proof, does not speak the
// protocol, or has not finished within HandshakeTimeout is disconnected
// and blocked on the Gater. Replaying a recorded handshake fails (fresh
// nonces), and relaying one between two other peers fails (the peer IDs
// are those of the connection).
//
// Until a peer is a member it gets nothing: Guard refuses its inference
// requests, PubSubOptions drop its gossip and keep it out of topic meshes,
// and AppScore graylists it in GossipSub.
//
// Membership is safe for concurrent use. It runs one goroutine per
// handshake in progress (bounded by connections and by the resource
// manager's MemberProtocol limit) and one timer per pending peer.
type Membership struct {
	h   host.Host
	cfg MembershipConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hkey []byte // MeshSubkey(cfg.Key, handshakeSubkey); nil without a Key

	mu      sync.Mutex
	closed  bool
	members map[peer.ID]struct{}
	pending map[peer.ID]*time.Timer

	verified, refused atomic.Int64
	notifee           *network.NotifyBundle
}

// NewMembership starts enforcing membership on h: it registers the
// handshake protocol and handshakes on every connection, those already
// open included. Close stops it.
func NewMembership(h host.Host, cfg MembershipConfig) (*Membership, error) {
	if len(cfg.Key) != 0 && len(cfg.Key) != MeshKeyLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrMeshKey, len(cfg.Key), MeshKeyLen)
	}
	if len(cfg.Key) == 0 && cfg.Gater == nil {
		return nil, errors.New("p2p: membership needs a mesh key or a gater with an allowlist")
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.BlockFor <= 0 {
		cfg.BlockFor = 10 * time.Minute
	}
	if cfg.OutsiderScore == 0 {
		cfg.OutsiderScore = -1000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Membership{h: h, cfg: cfg, log: log, ctx: ctx, cancel: cancel,
		members: map[peer.ID]struct{}{}, pending: map[peer.ID]*time.Timer{}}
	if len(cfg.Key) == 0 {
		return m, nil // the gater's allowlist decides; nothing to run
	}
	m.hkey = MeshSubkey(cfg.Key, handshakeSubkey)
	h.SetStreamHandler(MemberProtocol, m.respond)
	m.notifee = &network.NotifyBundle{
		ConnectedF:    func(_ network.Network, c network.Conn) { m.connected(c) },
		DisconnectedF: func(_ network.Network, c network.Conn) { m.disconnected(c.RemotePeer()) },
	}
	h.Network().Notify(m.notifee)
	for _, c := range h.Network().Conns() {
		m.connected(c)
	}
	return m, nil
}

// Close stops the handshakes and waits for those running; members stay
// members (IsMember keeps answering).
func (m *Membership) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for _, t := range m.pending {
		t.Stop()
	}
	m.mu.Unlock()
	if m.notifee != nil {
		m.h.Network().StopNotify(m.notifee)
		m.h.RemoveStreamHandler(MemberProtocol)
	}
	m.cancel()
	m.wg.Wait()
	return nil
}

// IsMember reports whether p belongs to the mesh: listed by the Gater (if
// it has an allowlist) and, with a Key, proven by a handshake on its
// current connection.
func (m *Membership) IsMember(p peer.ID) bool {
	if p == m.h.ID() {
		return true
	}
	if m.cfg.Gater != nil && !m.cfg.Gater.Allowed(p) {
		return false
	}
	if m.hkey == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.members[p]
	return ok
}

// Stats returns the handshake counters.
func (m *Membership) Stats() MembershipStats {
	m.mu.Lock()
	n := len(m.members)
	m.mu.Unlock()
	return MembershipStats{Members: n, Verified: m.verified.Load(), Refused: m.refused.Load()}
}

// connected starts the handshake for a new connection: the dialer asks,
// the listener waits for the question until the timeout.
func (m *Membership) connected(c network.Conn) {
	p := c.RemotePeer()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	if _, ok := m.members[p]; ok {
		m.mu.Unlock()
		return
	}
	if _, ok := m.pending[p]; !ok {
		m.pending[p] = time.AfterFunc(m.cfg.HandshakeTimeout, func() { m.expire(p) })
	}
	m.wg.Add(1)
	m.mu.Unlock()
	if c.Stat().Direction != network.DirOutbound {
		m.wg.Done()
		return
	}
	go func() {
		defer m.wg.Done()
		if err := m.initiate(p); err != nil {
			m.fail(p, err)
		}
	}()
}

// disconnected forgets p once its last connection closed: a reconnection
// handshakes again.
func (m *Membership) disconnected(p peer.ID) {
	if len(m.h.Network().ConnsToPeer(p)) > 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.members, p)
	if t, ok := m.pending[p]; ok {
		t.Stop()
		delete(m.pending, p)
	}
}

// expire fails p if it is still pending when its timer fires.
func (m *Membership) expire(p peer.ID) {
	m.mu.Lock()
	_, pending := m.pending[p]
	m.mu.Unlock()
	if pending {
		m.fail(p, errors.New("no handshake within the timeout"))
	}
}

// admit makes p a member.
func (m *Membership) admit(p peer.ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.pending[p]; ok {
		t.Stop()
		delete(m.pending, p)
	}
	if _, ok := m.members[p]; !ok {
		m.members[p] = struct{}{}
		m.verified.Add(1)
	}
}

// fail refuses p: counts and logs the refusal, blocks p on the gater and
// closes its connections. A failure outside p's pending window (the
// window's timer refused it already, or it left) changes nothing, unless
// it is a proof that failed: the other side's refusal may close the
// connection, and so the window, just before this side's report.
func (m *Membership) fail(p peer.ID, why error) {
	m.mu.Lock()
	t, pending := m.pending[p]
	if pending {
		t.Stop()
		delete(m.pending, p)
	}
	_, member := m.members[p]
	closed := m.closed
	m.mu.Unlock()
	if member || closed {
		return // proven on another connection meanwhile, or shutting down
	}
	if !pending && !handshakeFinal(why) {
		return
	}
	m.refused.Add(1)
	m.log.Info("refused a peer that is not a mesh member", "peer", p, "err", why)
	if m.cfg.Gater != nil {
		m.cfg.Gater.Block(p, m.cfg.BlockFor)
	}
	_ = m.h.Network().ClosePeer(p)
}

// errNotMember is the message a non-member's request is refused with.
const errNotMember = "not a member of this mesh"

// Guard wraps an InferHandler so that requests from peers that are not
// members are refused without reaching h. The refusal is ErrBusy with a
// retry hint of the handshake window, not a bad request: a member whose
// handshake is still pending is told to come back, and its router, which
// counts every other failed forward against the serving peer's trust, does
// not blame this peer for it. The origin serves the request itself.
func (m *Membership) Guard(h InferHandler) InferHandler {
	return func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		if !m.IsMember(from) {
			return nil, &InferError{Code: ErrBusy, Message: errNotMember, RetryAfter: m.cfg.HandshakeTimeout}
		}
		return h(ctx, from, req, send)
	}
}

// GuardSnapshots wraps a SnapshotProvider so that peers that are not
// members (with a key: not yet proven by the handshake, whose window
// is open for HandshakeTimeout after they connect) get no digest: they are
// answered as if this peer did not serve the model.
func (m *Membership) GuardSnapshots(p SnapshotProvider) SnapshotProvider {
	return func(from peer.ID, model string) ([]byte, bool) {
		if !m.IsMember(from) {
			return nil, false
		}
		return p(from, model)
	}
}

// AppScore is the membership part of the GossipSub application score: 0
// for members, OutsiderScore for any other peer.
func (m *Membership) AppScore(p peer.ID) float64 {
	if m.IsMember(p) {
		return 0
	}
	return m.cfg.OutsiderScore
}
