package p2p

import (
	"fmt"
	"math"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Load is a peer's load announcement, published on the model's topic
// whenever its queue changes noticeably and at least every few seconds.
//
// (Epoch, Seq) orders a peer's announcements: Epoch is fixed for the life of
// the process and grows across restarts (the start time in nanoseconds
// does), Seq grows by at least one per announcement. Receivers drop an
// announcement that is not newer than the last one they accepted from the
// same author.
type Load struct {
	Peer       peer.ID // author; must equal the gossip message's signer
	Epoch      uint64
	Seq        uint64
	At         time.Time // author's clock when sent (for display; ages use the receiver's clock)
	QueueDepth int       // requests waiting for a slot
	Active     int       // requests being served
	Slots      int       // parallel slots of the engine
	// PushBack asks others to stop forwarding to this peer for a while: its
	// queue is above its threshold and forwarded requests get ErrBusy.
	PushBack         bool
	PrefillTokPerSec float64 // measured prefill speed over uncached tokens
	DecodeTokPerSec  float64 // measured generation speed
}

// loadMagic starts every encoded Load; digests start with "md".
const loadMagic = "ml"

// maxLoadBytes bounds an encoded Load (the peer ID dominates).
const maxLoadBytes = 512

// maxPeerIDLen bounds the bytes of a peer ID on the wire.
const maxPeerIDLen = 128

// AppendBinary appends l's v1 encoding to b.
func (l *Load) AppendBinary(b []byte) []byte {
	b = append(b, loadMagic[0], loadMagic[1], wireVersion)
	b = appendString(b, string(l.Peer))
	b = appendUvarint(b, l.Epoch)
	b = appendUvarint(b, l.Seq)
	var at int64
	if !l.At.IsZero() {
		at = l.At.UnixNano()
	}
	b = appendVarint(b, at)
	b = appendUvarint(b, uint64(max(l.QueueDepth, 0)))
	b = appendUvarint(b, uint64(max(l.Active, 0)))
	b = appendUvarint(b, uint64(max(l.Slots, 0)))
	var flags uint64
	if l.PushBack {
		flags |= 1
	}
	b = appendUvarint(b, flags)
	b = appendF64(b, l.PrefillTokPerSec)
	return appendF64(b, l.DecodeTokPerSec)
}

// MarshalBinary returns l's v1 encoding.
func (l *Load) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil), nil }

// DecodeLoad decodes a v1 Load. Errors wrap ErrFrameMalformed.
func DecodeLoad(p []byte) (*Load, error) {
	if !hasMagic(p, loadMagic) {
		return nil, fmt.Errorf("%w: not a load announcement", ErrFrameMalformed)
	}
	if len(p) > maxLoadBytes {
		return nil, fmt.Errorf("%w: load announcement of %d bytes", ErrFrameTooLarge, len(p))
	}
	d := decoder{b: p[2:]}
	d.version("load")
	l := &Load{}
	id := d.str(maxPeerIDLen)
	if d.err == nil {
		if len(id) == 0 {
			d.fail("empty peer ID")
		} else if _, err := peer.IDFromBytes([]byte(id)); err != nil {
			d.fail("peer ID: %v", err)
		}
	}
	l.Peer = peer.ID(id)
	l.Epoch = d.uvarint(math.MaxUint64)
	l.Seq = d.uvarint(math.MaxUint64)
	if at := d.varint(); at != 0 {
		l.At = time.Unix(0, at)
	}
	l.QueueDepth = int(d.uvarint(math.MaxInt32))
	l.Active = int(d.uvarint(math.MaxInt32))
	l.Slots = int(d.uvarint(math.MaxInt32))
	flags := d.uvarint(math.MaxUint32)
	l.PushBack = flags&1 != 0
	l.PrefillTokPerSec = d.f64()
	l.DecodeTokPerSec = d.f64()
	if d.err == nil && (l.PrefillTokPerSec < 0 || l.DecodeTokPerSec < 0) {
		d.fail("negative speed")
	}
	if d.err != nil {
		return nil, d.err
	}
	return l, nil
}
