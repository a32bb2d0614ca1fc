package p2p

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// MemberProtocol is the stream protocol of the mesh-secret handshake.
const MemberProtocol protocol.ID = "/meshllm/member/1.0.0"

// MinSecretLen is the shortest mesh secret accepted, in bytes.
const MinSecretLen = 16

// nonceLen is the size of each side's challenge; macLen of an HMAC-SHA256.
const (
	nonceLen = 32
	macLen   = sha256.Size
)

// MembershipConfig configures a Membership; zero fields take the default
// in their comment.
type MembershipConfig struct {
	// Secret is the mesh secret, shared out of band by the mesh's members
	// (at least MinSecretLen bytes). Empty means no handshake: membership
	// is the Gater's allowlist alone.
	Secret []byte
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
// With a Secret, every new connection runs a challenge-response over
// MemberProtocol, started by the side that dialed: the dialer sends a
// nonce, the listener answers with its nonce and an HMAC-SHA256, keyed by
// the secret, over a label, its role, both peer IDs (as the secure channel
// authenticated them) and both nonces; the dialer checks it and answers
// with its own HMAC. Each side counts the other a member once its HMAC
// checked. A peer that sends a wrong HMAC, does not speak the protocol, or
// has not finished within HandshakeTimeout is disconnected and blocked on
// the Gater. Replaying a recorded handshake fails (fresh nonces), and
// relaying one between two other peers fails (the peer IDs are those of
// the connection).
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
	if len(cfg.Secret) > 0 && len(cfg.Secret) < MinSecretLen {
		return nil, fmt.Errorf("p2p: mesh secret of %d bytes, want at least %d", len(cfg.Secret), MinSecretLen)
	}
	if len(cfg.Secret) == 0 && cfg.Gater == nil {
		return nil, errors.New("p2p: membership needs a secret or a gater with an allowlist")
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
	if len(cfg.Secret) == 0 {
		return m, nil // the gater's allowlist decides; nothing to run
	}
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
// it has an allowlist) and, with a Secret, proven by a handshake on its
// current connection.
func (m *Membership) IsMember(p peer.ID) bool {
	if p == m.h.ID() {
		return true
	}
	if m.cfg.Gater != nil && !m.cfg.Gater.Allowed(p) {
		return false
	}
	if len(m.cfg.Secret) == 0 {
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

// fail blocks p on the gater and closes its connections.
func (m *Membership) fail(p peer.ID, why error) {
	m.mu.Lock()
	if t, ok := m.pending[p]; ok {
		t.Stop()
		delete(m.pending, p)
	}
	_, member := m.members[p]
	closed := m.closed
	m.mu.Unlock()
	if member || closed {
		return // proven on another connection meanwhile, or shutting down
	}
	m.refused.Add(1)
	m.log.Info("refused a peer that is not a mesh member", "peer", p, "err", why)
	if m.cfg.Gater != nil {
		m.cfg.Gater.Block(p, m.cfg.BlockFor)
	}
	_ = m.h.Network().ClosePeer(p)
}

// mac is the HMAC a side sends: role is "dialer" or "listener".
func (m *Membership) mac(role string, dialer, listener peer.ID, nd, nl []byte) []byte {
	h := hmac.New(sha256.New, m.cfg.Secret)
	for _, part := range [][]byte{[]byte("meshllm member handshake v1"), []byte(role), []byte(dialer), []byte(listener), nd, nl} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(part)>>24), byte(len(part)>>16), byte(len(part)>>8), byte(len(part))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// errBadMAC is a handshake answered with a wrong HMAC.
var errBadMAC = errors.New("wrong handshake HMAC")

// initiate runs the dialer's side of the handshake with p, retrying with
// backoff within HandshakeTimeout when the stream fails (the peer may
// still be starting its Membership: its libp2p host connects first); a
// wrong HMAC fails at once.
func (m *Membership) initiate(p peer.ID) error {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.HandshakeTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		err := m.handshake(ctx, p)
		if err == nil || errors.Is(err, errBadMAC) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// handshake is one attempt of initiate.
func (m *Membership) handshake(ctx context.Context, p peer.ID) error {
	st, err := m.h.NewStream(network.WithAllowLimitedConn(ctx, "membership"), p, MemberProtocol)
	if err != nil {
		return fmt.Errorf("open handshake: %w", err)
	}
	defer st.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	nd := make([]byte, nonceLen)
	_, _ = rand.Read(nd)
	if _, err := st.Write(nd); err != nil {
		_ = st.Reset()
		return err
	}
	buf := make([]byte, nonceLen+macLen)
	if _, err := io.ReadFull(st, buf); err != nil {
		_ = st.Reset()
		return fmt.Errorf("read challenge answer: %w", err)
	}
	nl, got := buf[:nonceLen], buf[nonceLen:]
	self := m.h.ID()
	if !hmac.Equal(got, m.mac("listener", self, p, nd, nl)) {
		_ = st.Reset()
		return errBadMAC
	}
	if _, err := st.Write(m.mac("dialer", self, p, nd, nl)); err != nil {
		_ = st.Reset()
		return err
	}
	m.admit(p)
	return nil
}

// respond runs the listener's side of the handshake on st.
func (m *Membership) respond(st network.Stream) {
	p := st.Conn().RemotePeer()
	_ = st.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	err := func() error {
		nd := make([]byte, nonceLen)
		if _, err := io.ReadFull(st, nd); err != nil {
			return fmt.Errorf("read challenge: %w", err)
		}
		nl := make([]byte, nonceLen)
		_, _ = rand.Read(nl)
		self := m.h.ID()
		if _, err := st.Write(append(nl, m.mac("listener", p, self, nd, nl)...)); err != nil {
			return err
		}
		got := make([]byte, macLen)
		if _, err := io.ReadFull(st, got); err != nil {
			return fmt.Errorf("read answer: %w", err)
		}
		if !hmac.Equal(got, m.mac("dialer", p, self, nd, nl)) {
			return errBadMAC
		}
		return nil
	}()
	if err != nil {
		_ = st.Reset()
		m.fail(p, err)
		return
	}
	_ = st.Close()
	m.admit(p)
}

// errNotMember is the message a non-member's request is refused with.
const errNotMember = "not a member of this mesh"

// Guard wraps an InferHandler so that requests from peers that are not
// members are refused with ErrBadRequest (the origin then serves them
// itself) without reaching h.
func (m *Membership) Guard(h InferHandler) InferHandler {
	return func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		if !m.IsMember(from) {
			return nil, &InferError{Code: ErrBadRequest, Message: errNotMember}
		}
		return h(ctx, from, req, send)
	}
}

// GuardSnapshots wraps a SnapshotProvider so that peers that are not
// members (in secret mode: not yet proven by the handshake, whose window
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
