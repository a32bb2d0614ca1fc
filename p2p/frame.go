package p2p

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"
)

// FrameType says what a frame's payload is. Each stream protocol uses a
// subset; docs/protocol.md lists them byte by byte.
type FrameType uint8

// Frame types of /meshllm/infer/1.0.0 and /meshllm/digest/1.0.0.
const (
	FrameInferRequest    FrameType = 1 // client -> server, once
	FrameInferPiece      FrameType = 2 // server -> client, zero or more
	FrameInferFinal      FrameType = 3 // server -> client, last frame of a served request
	FrameError           FrameType = 4 // server -> client, last frame of a failed request
	FrameSnapshotRequest FrameType = 5 // client -> server, once
	FrameSnapshot        FrameType = 6 // server -> client: cache.Digest bytes
)

func (t FrameType) String() string {
	switch t {
	case FrameInferRequest:
		return "infer-request"
	case FrameInferPiece:
		return "infer-piece"
	case FrameInferFinal:
		return "infer-final"
	case FrameError:
		return "error"
	case FrameSnapshotRequest:
		return "snapshot-request"
	case FrameSnapshot:
		return "snapshot"
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

// DefaultMaxFrame bounds a frame (type byte plus payload) unless a service or
// client sets its own limit: 1 MiB holds a 200k-token prompt.
const DefaultMaxFrame = 1 << 20

// maxLenBytes is the longest uvarint a frame length may take (2^63 fits).
const maxLenBytes = 10

// Frame errors; ReadFrame wraps them.
var (
	// ErrFrameMalformed: the bytes are not a frame (bad length prefix, zero
	// length, non-minimal varint) or a payload does not decode.
	ErrFrameMalformed = errors.New("p2p: malformed frame")
	// ErrFrameTooLarge: the length prefix exceeds the reader's limit.
	ErrFrameTooLarge = errors.New("p2p: frame too large")
)

// Frame is one decoded frame. Payload aliases no reader buffer: it is the
// caller's.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// AppendFrame appends the encoding of a frame to b: uvarint(1+len(payload)),
// the type byte, the payload.
func AppendFrame(b []byte, t FrameType, payload []byte) []byte {
	b = appendUvarint(b, uint64(1+len(payload)))
	b = append(b, byte(t))
	return append(b, payload...)
}

// WriteFrame writes one frame with a single Write call. It refuses a frame
// larger than max (type byte plus payload) so that a peer never sends what
// the other side must reject.
func WriteFrame(w io.Writer, t FrameType, payload []byte, max int) error {
	if 1+len(payload) > max {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, 1+len(payload), max)
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, maxLenBytes+1+len(payload)), t, payload))
	return err
}

// ReadFrame reads one frame from r. A length above max, a zero length, a
// non-minimal or overlong varint are errors (wrapping ErrFrameTooLarge or
// ErrFrameMalformed) before anything is allocated; a stream that ends inside
// a frame gives io.ErrUnexpectedEOF, one that ends before it io.EOF.
func ReadFrame(r *bufio.Reader, max int) (Frame, error) {
	n, err := readLen(r)
	if err != nil {
		return Frame{}, err
	}
	if n == 0 {
		return Frame{}, fmt.Errorf("%w: zero length", ErrFrameMalformed)
	}
	if n > uint64(max) {
		return Frame{}, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return Frame{Type: FrameType(buf[0]), Payload: buf[1:]}, nil
}

// readLen reads a minimal uvarint of at most maxLenBytes bytes.
func readLen(r io.ByteReader) (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < maxLenBytes; i++ {
		c, err := r.ReadByte()
		if err != nil {
			if i > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if c < 0x80 {
			if i > 0 && c == 0 {
				return 0, fmt.Errorf("%w: non-minimal length", ErrFrameMalformed)
			}
			if i == maxLenBytes-1 && c > 1 {
				return 0, fmt.Errorf("%w: length overflows", ErrFrameMalformed)
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, fmt.Errorf("%w: length overflows", ErrFrameMalformed)
}

// deadliner is the part of network.Stream that sets deadlines.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// frameConn reads and writes frames on one stream with a deadline on every
// read and write. It is used by one goroutine at a time.
type frameConn struct {
	s     deadliner
	w     io.Writer
	r     *bufio.Reader
	max   int           // largest frame accepted or sent
	read  time.Duration // deadline of each read; 0 = none
	write time.Duration // deadline of each write; 0 = none
	in    int64         // bytes read (frames only)
	out   int64         // bytes written
}

func newFrameConn(s interface {
	deadliner
	io.ReadWriter
}, max int, read, write time.Duration) *frameConn {
	return &frameConn{s: s, w: s, r: bufio.NewReaderSize(s, 4096), max: max, read: read, write: write}
}

// readFrame reads one frame, within d if d > 0 (else within fc.read).
func (fc *frameConn) readFrame(d time.Duration) (Frame, error) {
	if d <= 0 {
		d = fc.read
	}
	if d > 0 {
		_ = fc.s.SetReadDeadline(time.Now().Add(d))
	}
	f, err := ReadFrame(fc.r, fc.max)
	if err == nil {
		fc.in += int64(1 + len(f.Payload) + uvarintLen(uint64(1+len(f.Payload))))
	}
	return f, err
}

// writeFrame writes one frame within fc.write.
func (fc *frameConn) writeFrame(t FrameType, payload []byte) error {
	if fc.write > 0 {
		_ = fc.s.SetWriteDeadline(time.Now().Add(fc.write))
	}
	if err := WriteFrame(fc.w, t, payload, fc.max); err != nil {
		return err
	}
	fc.out += int64(1 + len(payload) + uvarintLen(uint64(1+len(payload))))
	return nil
}
