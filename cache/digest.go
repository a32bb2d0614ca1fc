package cache

import (
	"errors"
	"fmt"
)

// Kind says whether a Digest is a snapshot or a delta.
type Kind uint8

const (
	// KindSnapshot carries everything the peer advertises at (Epoch, Seq).
	KindSnapshot Kind = 1
	// KindDelta carries the change from (Epoch, Seq-1) to (Epoch, Seq).
	KindDelta Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindSnapshot:
		return "snapshot"
	case KindDelta:
		return "delta"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Digest is one gossip message about a peer's cache: a snapshot or a delta
// of the set of chain hashes it advertises.
//
// Epoch changes when the peer's cache starts afresh (a restart or a cache
// reset) and must grow: a peer can use its start time in nanoseconds. Seq
// counts the changes within an epoch, from 0 (the empty cache); the delta
// with Seq n turns state n-1 into state n. A snapshot's Seq is the state it
// shows.
//
// A Digest is a plain value; Source and Decode give each caller its own.
type Digest struct {
	Kind      Kind
	Peer      string // author's peer ID; receivers check it against the transport's authenticated sender
	Model     string // model identity (infer.ModelInfo.ID)
	BlockSize int    // tokens per block
	Epoch     uint64
	Seq       uint64
	// Held is how many blocks the peer's cache holds; more than the
	// snapshot lists when the digest is capped.
	Held int
	// Hashes lists the advertised chain hashes (snapshot, exact form).
	Hashes []Hash
	// Filter replaces Hashes in a snapshot of a cache larger than the cap
	// when the source runs in Bloom mode.
	Filter *Bloom
	// Added and Removed are a delta's changes; a receiver removes, then adds.
	Added, Removed []Hash
}

// Limits on what a digest may carry; Decode rejects anything larger, and
// Encode refuses to write it.
const (
	MaxPeerLen  = 128     // bytes of a peer ID
	MaxModelLen = 256     // bytes of a model identity
	MaxHashes   = 1 << 20 // hashes in one message, all lists together (8 MiB)
)

// Errors that Decode, Encode and Apply wrap.
var (
	ErrMalformed = errors.New("cache: malformed digest")
	ErrTooLarge  = errors.New("cache: digest exceeds size limits")
	ErrMismatch  = errors.New("cache: digest for another peer, model or block size")
)

// Validate checks d's fields against the limits.
func (d *Digest) Validate() error {
	switch {
	case d.Kind != KindSnapshot && d.Kind != KindDelta:
		return fmt.Errorf("%w: kind %d", ErrMalformed, d.Kind)
	case len(d.Peer) == 0 || len(d.Peer) > MaxPeerLen:
		return fmt.Errorf("%w: peer ID of %d bytes", ErrMalformed, len(d.Peer))
	case len(d.Model) > MaxModelLen:
		return fmt.Errorf("%w: model ID of %d bytes", ErrTooLarge, len(d.Model))
	case d.BlockSize <= 0 || d.BlockSize > MaxBlockSize:
		return fmt.Errorf("%w: block size %d", ErrMalformed, d.BlockSize)
	case d.Held < 0:
		return fmt.Errorf("%w: held %d", ErrMalformed, d.Held)
	case d.Kind == KindDelta && (d.Filter != nil || len(d.Hashes) > 0):
		return fmt.Errorf("%w: delta with snapshot fields", ErrMalformed)
	case d.Kind == KindSnapshot && (len(d.Added) > 0 || len(d.Removed) > 0):
		return fmt.Errorf("%w: snapshot with delta fields", ErrMalformed)
	case d.Kind == KindSnapshot && d.Filter != nil && len(d.Hashes) > 0:
		return fmt.Errorf("%w: snapshot with both hashes and a filter", ErrMalformed)
	case d.Filter != nil && (d.Filter.k < 1 || d.Filter.k > MaxBloomHashes || len(d.Filter.bits) == 0):
		return fmt.Errorf("%w: bloom filter k=%d words=%d", ErrMalformed, d.Filter.k, len(d.Filter.bits))
	}
	n := len(d.Hashes) + len(d.Added) + len(d.Removed)
	if d.Filter != nil {
		n += len(d.Filter.bits)
	}
	if n > MaxHashes {
		return fmt.Errorf("%w: %d hashes", ErrTooLarge, n)
	}
	return nil
}
