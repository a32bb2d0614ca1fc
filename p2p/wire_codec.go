package p2p

import (
	"encoding/binary"
	"fmt"
	"math"
)

// wireVersion is the first byte of every payload this package encodes
// unless it needs wireVersionExt. A decoder rejects versions it does not
// know; a revision that only appends fields a receiver may safely ignore
// keeps the version (decoders ignore bytes after the fields they know), one
// whose new fields change what must be served (they must not be ignored)
// or that changes a field's meaning bumps it, and one that breaks the
// framing bumps the protocol ID.
const wireVersion = 1

// wireVersionExt (2) marks an infer request whose sampling uses the fields
// added for structured outputs, OpenAI's penalties and logprobs, and a
// piece that carries logprobs: v1's fields, then the new ones. A v1-only
// peer rejects such a request as malformed (a bad-request answer, after
// which the origin serves it itself) instead of serving it without its
// constraint; a request without them stays v1, so old and new peers still
// serve each other's plain requests. Every other payload stays v1.
const wireVersionExt = 2

func appendUvarint(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }

func appendVarint(b []byte, x int64) []byte { return binary.AppendVarint(b, x) }

func appendString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendF32(b []byte, f float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
}

func appendF64(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// decoder reads a payload field by field. The first failure sticks: later
// reads return zero values, and err says what went wrong first.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrFrameMalformed}, args...)...)
	}
	d.b = nil
}

// version reads and checks the version byte, which must be wireVersion.
func (d *decoder) version(what string) { d.versionUpTo(what, wireVersion) }

// versionUpTo reads and checks the version byte, which must lie between
// wireVersion and newest, and returns it (0 after a failure).
func (d *decoder) versionUpTo(what string, newest byte) byte {
	if len(d.b) == 0 {
		d.fail("%s: empty payload", what)
		return 0
	}
	v := d.b[0]
	if v < wireVersion || v > newest {
		if newest == wireVersion {
			d.fail("%s: version %d, want %d", what, v, wireVersion)
		} else {
			d.fail("%s: version %d, want %d..%d", what, v, wireVersion, newest)
		}
		return 0
	}
	d.b = d.b[1:]
	return v
}

// uvarint reads a minimal uvarint no larger than limit.
func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	switch {
	case n <= 0:
		d.fail("bad varint")
		return 0
	case n != uvarintLen(x):
		d.fail("non-minimal varint")
		return 0
	case x > limit:
		d.fail("value %d above limit %d", x, limit)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// varint reads a minimal zig-zag varint.
func (d *decoder) varint() int64 {
	u := d.uvarint(math.MaxUint64)
	return int64(u>>1) ^ -int64(u&1)
}

// int32 reads a zig-zag varint that must fit an int32 (sampling parameters).
func (d *decoder) int32() int {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("value %d out of int32 range", v)
		return 0
	}
	return int(v)
}

// count reads a length that must not exceed the bytes left divided by the
// minimum encoded size of one element, so nothing is allocated for bytes
// that are not there.
func (d *decoder) count(limit, minSize int) int {
	n := d.uvarint(uint64(limit))
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) str(limit int) string {
	n := d.count(limit, 1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) f32() float32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.fail("truncated float32")
		return 0
	}
	f := math.Float32frombits(binary.LittleEndian.Uint32(d.b))
	d.b = d.b[4:]
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		d.fail("non-finite float32")
		return 0
	}
	return f
}

func (d *decoder) f64() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated float64")
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail("non-finite float64")
		return 0
	}
	return f
}
