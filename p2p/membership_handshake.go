package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// handshakeFinal reports whether a handshake error ends it: a proof was
// refused or wrong, as opposed to a stream that could not be opened or
// broke before any proof (the peer may still be starting).
func handshakeFinal(err error) bool {
	return errors.Is(err, ErrWrongProof) || errors.Is(err, ErrProofRefused)
}

// initiate runs the dialer's side of the handshake with p, retrying with
// backoff within HandshakeTimeout while the stream cannot be opened or
// breaks before the proof went out (the peer may still be starting its
// Membership: its libp2p host connects first); a refused or wrong proof
// fails at once.
func (m *Membership) initiate(p peer.ID) error {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.HandshakeTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		err := m.dial(ctx, p)
		if err == nil || handshakeFinal(err) {
			return err
		}
		if len(m.h.Network().ConnsToPeer(p)) == 0 {
			return nil // p left: its window closed with its last connection
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// dial is one attempt of initiate.
func (m *Membership) dial(ctx context.Context, p peer.ID) error {
	// The handshake belongs to a connection: never dial one for it.
	ctx = network.WithNoDial(network.WithAllowLimitedConn(ctx, "membership"), "membership")
	st, err := m.h.NewStream(ctx, p, MemberProtocol)
	if err != nil {
		return fmt.Errorf("open handshake: %w", err)
	}
	stop := boundStream(ctx, st)
	defer stop()
	if err := dialHandshake(st, m.hkey); err != nil {
		_ = st.Reset()
		return err
	}
	_ = st.Close()
	m.admit(p)
	return nil
}

// respond runs the listener's side of the handshake on st, within
// HandshakeTimeout of the stream's opening.
func (m *Membership) respond(st network.Stream) {
	p := st.Conn().RemotePeer()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		_ = st.Reset()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.HandshakeTimeout)
	defer cancel()
	stop := boundStream(ctx, st)
	defer stop()
	if err := listenHandshake(st, m.hkey, func() { m.admit(p) }); err != nil {
		_ = st.Reset()
		m.fail(p, err)
		return
	}
	_ = st.Close()
}
