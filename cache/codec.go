package cache

import (
	"encoding/binary"
	"fmt"
)

// Wire format, version 1 (all integers unsigned varints unless stated):
//
//	magic 'm' 'd', version byte, kind byte, flags byte (bit 0: Bloom filter)
//	len(peer) peer, len(model) model, block size, epoch, seq, held
//	snapshot: count, count x 8-byte little-endian hashes
//	          or, with the Bloom flag: k, words, words x 8-byte little-endian words
//	delta:    count added, hashes, count removed, hashes
//
// Hashes are uniform 64-bit values, so they go as fixed 8 bytes: a varint
// would take 9-10. A message of n hashes is 8n bytes plus a header of about
// 20 bytes plus the two IDs.
const (
	wireVersion = 1
	flagBloom   = 1
)

var magic = [2]byte{'m', 'd'}

// EncodedSize returns the exact length Encode will produce for d.
func (d *Digest) EncodedSize() int {
	n := 5 + uvarintLen(uint64(len(d.Peer))) + len(d.Peer) + uvarintLen(uint64(len(d.Model))) + len(d.Model)
	n += uvarintLen(uint64(d.BlockSize)) + uvarintLen(d.Epoch) + uvarintLen(d.Seq) + uvarintLen(uint64(d.Held))
	switch {
	case d.Kind == KindDelta:
		n += uvarintLen(uint64(len(d.Added))) + 8*len(d.Added) + uvarintLen(uint64(len(d.Removed))) + 8*len(d.Removed)
	case d.Filter != nil:
		n += uvarintLen(uint64(d.Filter.k)) + uvarintLen(uint64(len(d.Filter.bits))) + 8*len(d.Filter.bits)
	default:
		n += uvarintLen(uint64(len(d.Hashes))) + 8*len(d.Hashes)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// AppendBinary appends d's wire form to b. It fails if d is invalid.
func (d *Digest) AppendBinary(b []byte) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return b, err
	}
	flags := byte(0)
	if d.Filter != nil {
		flags |= flagBloom
	}
	b = append(b, magic[0], magic[1], wireVersion, byte(d.Kind), flags)
	b = binary.AppendUvarint(b, uint64(len(d.Peer)))
	b = append(b, d.Peer...)
	b = binary.AppendUvarint(b, uint64(len(d.Model)))
	b = append(b, d.Model...)
	b = binary.AppendUvarint(b, uint64(d.BlockSize))
	b = binary.AppendUvarint(b, d.Epoch)
	b = binary.AppendUvarint(b, d.Seq)
	b = binary.AppendUvarint(b, uint64(d.Held))
	switch {
	case d.Kind == KindDelta:
		b = appendHashes(b, d.Added)
		b = appendHashes(b, d.Removed)
	case d.Filter != nil:
		b = binary.AppendUvarint(b, uint64(d.Filter.k))
		b = binary.AppendUvarint(b, uint64(len(d.Filter.bits)))
		for _, w := range d.Filter.bits {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	default:
		b = appendHashes(b, d.Hashes)
	}
	return b, nil
}

// MarshalBinary returns d's wire form.
func (d *Digest) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, d.EncodedSize()))
}

func appendHashes(b []byte, hs []Hash) []byte {
	b = binary.AppendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = binary.LittleEndian.AppendUint64(b, uint64(h))
	}
	return b
}

// UnmarshalBinary decodes a digest; see Decode.
func (d *Digest) UnmarshalBinary(data []byte) error {
	got, err := Decode(data)
	if err != nil {
		return err
	}
	*d = *got
	return nil
}

// Decode parses a digest. It rejects, with an error wrapping ErrMalformed or
// ErrTooLarge, anything that is not exactly one valid version-1 message: it
// never panics, and it allocates at most about twice len(data).
func Decode(data []byte) (*Digest, error) {
	r := reader{b: data}
	var head [5]byte
	r.bytes(head[:])
	if r.err != nil || head[0] != magic[0] || head[1] != magic[1] {
		return nil, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	if head[2] != wireVersion {
		return nil, fmt.Errorf("%w: version %d", ErrMalformed, head[2])
	}
	d := &Digest{Kind: Kind(head[3])}
	flags := head[4]
	if flags&^flagBloom != 0 || (flags&flagBloom != 0 && d.Kind != KindSnapshot) {
		return nil, fmt.Errorf("%w: flags %#x", ErrMalformed, flags)
	}
	d.Peer = r.str(MaxPeerLen)
	d.Model = r.str(MaxModelLen)
	d.BlockSize = int(r.uvarint(MaxBlockSize))
	d.Epoch = r.uvarint(^uint64(0))
	d.Seq = r.uvarint(^uint64(0))
	d.Held = int(r.uvarint(1 << 40))
	switch {
	case d.Kind == KindDelta:
		d.Added = r.hashes()
		d.Removed = r.hashes()
	case flags&flagBloom != 0:
		k := int(r.uvarint(MaxBloomHashes))
		words := r.count()
		if r.err == nil {
			d.Filter = &Bloom{k: k, bits: make([]uint64, words)}
			for i := range d.Filter.bits {
				d.Filter.bits[i] = r.u64()
			}
		}
	default:
		d.Hashes = r.hashes()
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// reader consumes a byte slice, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (r *reader) bytes(dst []byte) {
	if r.err != nil {
		return
	}
	if len(r.b) < len(dst) {
		r.fail("truncated")
		return
	}
	copy(dst, r.b)
	r.b = r.b[len(dst):]
}

func (r *reader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 || n != uvarintLen(x) {
		r.fail("bad or non-minimal varint")
		return 0
	}
	if x > limit {
		r.err = fmt.Errorf("%w: field %d over limit %d", ErrTooLarge, x, limit)
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) str(limit int) string {
	n := r.uvarint(uint64(limit))
	if r.err != nil {
		return ""
	}
	if uint64(len(r.b)) < n {
		r.fail("truncated string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a count of 8-byte items, checked against MaxHashes and
// against the bytes left, before anything is allocated for them.
func (r *reader) count() int {
	n := r.uvarint(MaxHashes)
	if r.err == nil && uint64(len(r.b))/8 < n {
		r.fail("count %d exceeds the %d bytes left", n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *reader) u64() uint64 {
	x := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return x
}

func (r *reader) hashes() []Hash {
	n := r.count()
	if r.err != nil || n == 0 {
		return nil
	}
	hs := make([]Hash, n)
	for i := range hs {
		hs[i] = Hash(r.u64())
	}
	return hs
}
