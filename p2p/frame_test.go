package p2p

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	payloads := [][]byte{nil, {0}, bytes.Repeat([]byte{7}, 127), bytes.Repeat([]byte{9}, 128), bytes.Repeat([]byte{1}, 70000)}
	for i, p := range payloads {
		if err := WriteFrame(&buf, FrameType(i+1), p, DefaultMaxFrame); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&buf)
	for i, p := range payloads {
		f, err := ReadFrame(r, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Type != FrameType(i+1) || !bytes.Equal(f.Payload, p) {
			t.Fatalf("frame %d: got type %v, %d bytes", i, f.Type, len(f.Payload))
		}
	}
	if _, err := ReadFrame(r, DefaultMaxFrame); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestWriteFrameRefusesOversize(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, FrameInferPiece, make([]byte, 10), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes of a refused frame", buf.Len())
	}
	if err := WriteFrame(&buf, FrameInferPiece, make([]byte, 9), 10); err != nil {
		t.Fatalf("frame of exactly the limit: %v", err)
	}
}

func TestReadFrameRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"zero length", []byte{0, 1}, ErrFrameMalformed},
		{"non-minimal length", []byte{0x81, 0x00, 1}, ErrFrameMalformed},
		{"overlong length", bytes.Repeat([]byte{0xff}, 11), ErrFrameMalformed},
		{"length overflows 64 bits", append(bytes.Repeat([]byte{0xff}, 9), 0x02), ErrFrameMalformed},
		{"oversize", []byte{0x80, 0x80, 0x40}, ErrFrameTooLarge}, // 1 MiB + 0
		{"huge claim, no bytes", append(bytes.Repeat([]byte{0xff}, 9), 0x01), ErrFrameTooLarge},
		{"truncated payload", []byte{5, 1, 2}, io.ErrUnexpectedEOF},
		{"truncated length", []byte{0x80}, io.ErrUnexpectedEOF},
		{"empty", nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.in)), DefaultMaxFrame-1)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzReadFrame feeds arbitrary bytes to ReadFrame: it must not panic,
// every frame it returns must re-encode to exactly the bytes it consumed
// (the encoding is canonical), and no frame may exceed the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FrameInferPiece, []byte("hello")))
	f.Add(AppendFrame(AppendFrame(nil, FrameInferRequest, []byte{1, 2, 3}), FrameError, nil))
	f.Add([]byte{0x81, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	const limit = 4096
	f.Fuzz(func(t *testing.T, data []byte) {
		cr := &countingReader{r: bytes.NewReader(data)}
		r := bufio.NewReaderSize(cr, 16)
		consumed := 0
		for {
			fr, err := ReadFrame(r, limit)
			if err != nil {
				return
			}
			if 1+len(fr.Payload) > limit {
				t.Fatalf("frame of %d bytes above limit", 1+len(fr.Payload))
			}
			enc := AppendFrame(nil, fr.Type, fr.Payload)
			if !bytes.Equal(enc, data[consumed:consumed+len(enc)]) {
				t.Fatalf("frame does not re-encode to its bytes")
			}
			consumed += len(enc)
		}
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func BenchmarkFrameRoundTrip(b *testing.B) {
	payload := bytes.Repeat([]byte{'x'}, 64)
	var buf bytes.Buffer
	r := bufio.NewReader(&buf)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteFrame(&buf, FrameInferPiece, payload, DefaultMaxFrame); err != nil {
			b.Fatal(err)
		}
		if _, err := ReadFrame(r, DefaultMaxFrame); err != nil {
			b.Fatal(err)
		}
	}
}
