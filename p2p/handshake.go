package p2p

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// MemberProtocol is the stream protocol of the membership handshake. It is
// versioned: in 2.0.0 the dialer proves first and the listener reveals
// nothing keyed by the mesh key until that proof checked. A 1.0.0 peer
// (where the listener proved first) does not speak it and a 2.0.0 peer does
// not answer 1.0.0, so old and new peers fail closed: each refuses the
// other at the handshake timeout, and a private mesh upgrades all its
// members together.
const MemberProtocol protocol.ID = "/meshllm/member/2.0.0"

// nonceLen is the size of each side's fresh challenge; proofLen that of an
// HMAC-SHA256.
const (
	nonceLen = 32
	proofLen = sha256.Size
)

// The two roles of a handshake, part of what each proof covers.
const (
	roleDialer   = "dialer"
	roleListener = "listener"
)

// handshakeSubkey is the purpose the membership proofs' key is derived
// under from the mesh key (MeshSubkey), so that it is never the key any
// other use of the mesh key sees.
const handshakeSubkey = "membership handshake"

var (
	// ErrWrongProof is a membership proof that does not verify: the peer
	// holds another mesh key, or made the proof for another connection
	// (other peer IDs: a proof relayed from elsewhere).
	ErrWrongProof = errors.New("p2p: wrong membership proof")
	// ErrProofRefused is a listener that ended the handshake after the
	// dialer's proof instead of answering with its own: it holds another
	// mesh key.
	ErrProofRefused = errors.New("p2p: the peer refused our membership proof")
)

// handshakeTranscript is what both proofs of one handshake cover: the two
// peer IDs as the connection's secure channel authenticated them (never
// as a peer claims them) and both fresh nonces.
type handshakeTranscript struct {
	dialer, listener peer.ID
	nd, nl           []byte
}

// transcriptOf starts the transcript of a handshake on c, whose local side
// dialed when outbound is true.
func transcriptOf(c network.Conn, outbound bool) *handshakeTranscript {
	if outbound {
		return &handshakeTranscript{dialer: c.LocalPeer(), listener: c.RemotePeer()}
	}
	return &handshakeTranscript{dialer: c.RemotePeer(), listener: c.LocalPeer()}
}

// proof is the HMAC-SHA256, keyed by the handshake key, that the side in
// role sends: over the protocol ID, the role, both peer IDs and both
// nonces, each length-prefixed.
func (tr *handshakeTranscript) proof(key []byte, role string) []byte {
	h := hmac.New(sha256.New, key)
	for _, part := range [][]byte{[]byte(MemberProtocol), []byte(role), []byte(tr.dialer), []byte(tr.listener), tr.nd, tr.nl} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// check verifies the proof the side in role sent.
func (tr *handshakeTranscript) check(key []byte, role string, got []byte) error {
	if !hmac.Equal(got, tr.proof(key, role)) {
		return ErrWrongProof
	}
	return nil
}

// freshNonce returns nonceLen random bytes.
func freshNonce() []byte {
	n := make([]byte, nonceLen)
	_, _ = rand.Read(n) // never fails (crypto/rand panics instead)
	return n
}

// boundStream makes st fail once ctx ends: through its deadline on real
// transports, and by a reset on those without deadlines (mocknet) and when
// ctx is cancelled early. The returned stop releases the reset.
func boundStream(ctx context.Context, st network.Stream) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { _ = st.Reset() })
}

// dialHandshake runs the dialer's side of the handshake on st, which it
// opened: its nonce out, the listener's nonce in, its proof out, the
// listener's proof in. The dialer proves first, so a listener that does
// not hold the key learns nothing but a proof made with the dialer's key
// (see docs/security.md: with a passphrase, that proof can be ground).
// Errors after the proof went out are final (ErrProofRefused,
// ErrWrongProof); earlier ones may be worth a retry.
func dialHandshake(st network.Stream, key []byte) error {
	tr := transcriptOf(st.Conn(), true)
	tr.nd = freshNonce()
	if _, err := st.Write(tr.nd); err != nil {
		return fmt.Errorf("send nonce: %w", err)
	}
	tr.nl = make([]byte, nonceLen)
	if _, err := io.ReadFull(st, tr.nl); err != nil {
		return fmt.Errorf("read the listener's nonce: %w", err)
	}
	if _, err := st.Write(tr.proof(key, roleDialer)); err != nil {
		return fmt.Errorf("%w: send proof: %v", ErrProofRefused, err)
	}
	got := make([]byte, proofLen)
	if _, err := io.ReadFull(st, got); err != nil {
		return fmt.Errorf("%w: %v", ErrProofRefused, err)
	}
	return tr.check(key, roleListener, got)
}

// listenHandshake runs the listener's side on st: the dialer's nonce in,
// its own out, the dialer's proof in and checked, and only then (after
// proven, once the dialer's proof checked) its own proof out. A dialer
// that does not prove gets nothing but a random nonce.
func listenHandshake(st network.Stream, key []byte, proven func()) error {
	tr := transcriptOf(st.Conn(), false)
	tr.nd = make([]byte, nonceLen)
	if _, err := io.ReadFull(st, tr.nd); err != nil {
		return fmt.Errorf("read the dialer's nonce: %w", err)
	}
	tr.nl = freshNonce()
	if _, err := st.Write(tr.nl); err != nil {
		return fmt.Errorf("send nonce: %w", err)
	}
	got := make([]byte, proofLen)
	if _, err := io.ReadFull(st, got); err != nil {
		return fmt.Errorf("read the dialer's proof: %w", err)
	}
	if err := tr.check(key, roleDialer, got); err != nil {
		return err
	}
	proven() // the dialer may send requests as soon as it has our proof
	if _, err := st.Write(tr.proof(key, roleListener)); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	return nil
}
