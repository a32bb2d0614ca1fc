package infer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// GGUF file constants.
const (
	// GGUFMagic is the first four bytes of a GGUF file ("GGUF", little endian).
	GGUFMagic = 0x46554747
	// GGUFDefaultAlignment is the tensor data alignment unless the file sets
	// general.alignment.
	GGUFDefaultAlignment = 32
)

// GGUF metadata value types, as stored in the file.
const (
	GGUFTypeUint8   uint32 = 0
	GGUFTypeInt8    uint32 = 1
	GGUFTypeUint16  uint32 = 2
	GGUFTypeInt16   uint32 = 3
	GGUFTypeUint32  uint32 = 4
	GGUFTypeInt32   uint32 = 5
	GGUFTypeFloat32 uint32 = 6
	GGUFTypeBool    uint32 = 7
	GGUFTypeString  uint32 = 8
	GGUFTypeArray   uint32 = 9
	GGUFTypeUint64  uint32 = 10
	GGUFTypeInt64   uint32 = 11
	GGUFTypeFloat64 uint32 = 12
)

// Decoder limits: they bound what a corrupt or hostile header can make the
// reader allocate.
const (
	ggufMaxKV        = 1 << 16
	ggufMaxTensors   = 1 << 20
	ggufMaxString    = 64 << 20
	ggufMaxArray     = 1 << 26
	ggufMaxDims      = 8
	ggufMaxNesting   = 4
	ggufReadChunk    = 64 << 10
	ggufMaxArrayElem = 1 << 20 // elements pre-allocated at once
)

// ErrNotGGUF is returned when a file does not start with the GGUF magic.
var ErrNotGGUF = errors.New("not a GGUF file")

// GGUFFile is the header of a GGUF file: its metadata key/values and its
// tensor descriptions (the tensor data itself is not read).
//
// Metadata values decode to Go types: uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64, float64, and for arrays a
// slice of one of those ([]string, []float32, []int32, ...) or []any for
// arrays of arrays. A GGUFFile is a plain value: safe to read concurrently,
// not to modify concurrently.
type GGUFFile struct {
	Version    uint32
	KV         map[string]any
	Keys       []string // metadata keys in file order
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset int64 // where tensor data starts
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // innermost first, as ggml stores them
	Type   uint32   // ggml_type
	Offset uint64   // from the start of the tensor data
}

// Elements is the number of values in the tensor.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// ReadGGUFFile reads the header of the GGUF file at path.
func ReadGGUFFile(path string) (*GGUFFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, err := ReadGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ReadGGUF decodes a GGUF header (versions 2 and 3) from r. It reads up to
// the end of the tensor infos and no further.
func ReadGGUF(r io.Reader) (*GGUFFile, error) {
	d := &ggufDecoder{r: bufio.NewReaderSize(r, 1<<16)}
	return d.decode()
}

type ggufDecoder struct {
	r   *bufio.Reader
	n   int64 // bytes consumed
	buf [8]byte
}

func (d *ggufDecoder) decode() (*GGUFFile, error) {
	magic, err := d.u32()
	if err != nil {
		return nil, ErrNotGGUF
	}
	if magic != GGUFMagic {
		return nil, ErrNotGGUF
	}
	g := &GGUFFile{KV: map[string]any{}, Alignment: GGUFDefaultAlignment}
	if g.Version, err = d.u32(); err != nil {
		return nil, err
	}
	if g.Version < 2 || g.Version > 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d", g.Version)
	}
	nTensors, err := d.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64()
	if err != nil {
		return nil, err
	}
	if nTensors > ggufMaxTensors || nKV > ggufMaxKV {
		return nil, fmt.Errorf("gguf: implausible header (%d tensors, %d keys)", nTensors, nKV)
	}
	for i := uint64(0); i < nKV; i++ {
		key, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("gguf: key %d: %w", i, err)
		}
		typ, err := d.u32()
		if err != nil {
			return nil, err
		}
		v, err := d.value(typ, 0)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", key, err)
		}
		if _, dup := g.KV[key]; !dup {
			g.Keys = append(g.Keys, key)
		}
		g.KV[key] = v
	}
	if a, ok := g.KV["general.alignment"].(uint32); ok {
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("gguf: alignment %d is not a power of two", a)
		}
		g.Alignment = uint64(a)
	}
	g.Tensors = make([]TensorInfo, 0, min(nTensors, 4096))
	for i := uint64(0); i < nTensors; i++ {
		var t TensorInfo
		if t.Name, err = d.str(); err != nil {
			return nil, fmt.Errorf("gguf: tensor %d: %w", i, err)
		}
		nd, err := d.u32()
		if err != nil {
			return nil, err
		}
		if nd == 0 || nd > ggufMaxDims {
			return nil, fmt.Errorf("gguf: tensor %s has %d dimensions", t.Name, nd)
		}
		t.Dims = make([]uint64, nd)
		for j := range t.Dims {
			if t.Dims[j], err = d.u64(); err != nil {
				return nil, err
			}
		}
		if t.Type, err = d.u32(); err != nil {
			return nil, err
		}
		if t.Offset, err = d.u64(); err != nil {
			return nil, err
		}
		g.Tensors = append(g.Tensors, t)
	}
	pad := (g.Alignment - uint64(d.n)%g.Alignment) % g.Alignment
	g.DataOffset = d.n + int64(pad)
	return g, nil
}

func (d *ggufDecoder) full(n int) ([]byte, error) {
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	d.n += int64(n)
	return b, nil
}

func (d *ggufDecoder) u8() (uint8, error) {
	b, err := d.full(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *ggufDecoder) u16() (uint16, error) {
	b, err := d.full(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (d *ggufDecoder) u32() (uint32, error) {
	b, err := d.full(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *ggufDecoder) u64() (uint64, error) {
	b, err := d.full(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string, growing its buffer as bytes arrive so
// that a lying length cannot make it allocate more than the input holds.
func (d *ggufDecoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > ggufMaxString {
		return "", fmt.Errorf("string of %d bytes", n)
	}
	if n <= ggufReadChunk {
		b := make([]byte, n)
		if _, err := io.ReadFull(d.r, b); err != nil {
			return "", io.ErrUnexpectedEOF
		}
		d.n += int64(n)
		return string(b), nil
	}
	var b []byte
	for rem := n; rem > 0; {
		c := min(rem, ggufReadChunk)
		b = append(b, make([]byte, c)...)
		if _, err := io.ReadFull(d.r, b[len(b)-int(c):]); err != nil {
			return "", io.ErrUnexpectedEOF
		}
		rem -= c
	}
	d.n += int64(n)
	return string(b), nil
}

func (d *ggufDecoder) value(typ uint32, depth int) (any, error) {
	switch typ {
	case GGUFTypeUint8:
		return d.u8()
	case GGUFTypeInt8:
		v, err := d.u8()
		return int8(v), err
	case GGUFTypeUint16:
		return d.u16()
	case GGUFTypeInt16:
		v, err := d.u16()
		return int16(v), err
	case GGUFTypeUint32:
		return d.u32()
	case GGUFTypeInt32:
		v, err := d.u32()
		return int32(v), err
	case GGUFTypeFloat32:
		v, err := d.u32()
		return math.Float32frombits(v), err
	case GGUFTypeBool:
		v, err := d.u8()
		return v != 0, err
	case GGUFTypeString:
		return d.str()
	case GGUFTypeUint64:
		return d.u64()
	case GGUFTypeInt64:
		v, err := d.u64()
		return int64(v), err
	case GGUFTypeFloat64:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case GGUFTypeArray:
		if depth >= ggufMaxNesting {
			return nil, errors.New("arrays nested too deep")
		}
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		n, err := d.u64()
		if err != nil {
			return nil, err
		}
		if n > ggufMaxArray {
			return nil, fmt.Errorf("array of %d elements", n)
		}
		return d.array(et, int(n), depth+1)
	}
	return nil, fmt.Errorf("unknown value type %d", typ)
}

func readArray[T any](d *ggufDecoder, n int, read func() (T, error)) ([]T, error) {
	out := make([]T, 0, min(n, ggufMaxArrayElem))
	for range n {
		v, err := read()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *ggufDecoder) array(et uint32, n, depth int) (any, error) {
	switch et {
	case GGUFTypeUint8:
		return readArray(d, n, d.u8)
	case GGUFTypeInt8:
		return readArray(d, n, func() (int8, error) { v, err := d.u8(); return int8(v), err })
	case GGUFTypeUint16:
		return readArray(d, n, d.u16)
	case GGUFTypeInt16:
		return readArray(d, n, func() (int16, error) { v, err := d.u16(); return int16(v), err })
	case GGUFTypeUint32:
		return readArray(d, n, d.u32)
	case GGUFTypeInt32:
		return readArray(d, n, func() (int32, error) { v, err := d.u32(); return int32(v), err })
	case GGUFTypeFloat32:
		return readArray(d, n, func() (float32, error) { v, err := d.u32(); return math.Float32frombits(v), err })
	case GGUFTypeBool:
		return readArray(d, n, func() (bool, error) { v, err := d.u8(); return v != 0, err })
	case GGUFTypeString:
		return readArray(d, n, d.str)
	case GGUFTypeUint64:
		return readArray(d, n, d.u64)
	case GGUFTypeInt64:
		return readArray(d, n, func() (int64, error) { v, err := d.u64(); return int64(v), err })
	case GGUFTypeFloat64:
		return readArray(d, n, func() (float64, error) { v, err := d.u64(); return math.Float64frombits(v), err })
	case GGUFTypeArray:
		return readArray(d, n, func() (any, error) { return d.value(GGUFTypeArray, depth) })
	}
	return nil, fmt.Errorf("unknown array element type %d", et)
}
