package synth

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Type is the storage type of the weight matrices (a ggml_type value).
// Norm gains and biases are always F32, as llama.cpp's converter writes them.
type Type uint32

// Weight types.
const (
	F32 Type = 0
	F16 Type = 1
)

func (t Type) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// ParseType parses "f16" or "f32" (any case).
func ParseType(s string) (Type, error) {
	switch s {
	case "f16", "F16":
		return F16, nil
	case "f32", "F32":
		return F32, nil
	}
	return 0, fmt.Errorf("unknown weight type %q (f16, f32)", s)
}

func (t Type) size() uint64 {
	if t == F16 {
		return 2
	}
	return 4
}

// Options control Write. The zero value writes F32 weights with seed 0.
type Options struct {
	// Type of the weight matrices: F16 (half the file, llama.cpp's usual
	// unquantized type) or F32.
	Type Type
	// Seed of the random weights: equal seeds give byte-identical files.
	Seed uint64
	// Progress, when set, is called as data is written with the bytes
	// written so far and the file's total size.
	Progress func(written, total int64)
}

const (
	alignment  = 32
	weightStd  = 0.02 // weights are uniform with this standard deviation
	tableBits  = 12   // random values come from a table of 2^12 values
	chunkBytes = 4 << 20
)

// Size returns the size in bytes of the file Write produces.
func Size(s Shape, o Options) (int64, error) {
	l, err := newLayout(s, o)
	if err != nil {
		return 0, err
	}
	return l.total, nil
}

// WriteFile writes the model to path, through a temporary file renamed
// into place, so a crash never leaves a truncated model behind.
func WriteFile(path string, s Shape, o Options) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".synth-*.gguf")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = Write(tmp, s, o); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// layout is the file's header and the placement of its tensors.
type layout struct {
	header  []byte // magic .. tensor infos, padded to the alignment
	tensors []tensor
	types   []Type
	offsets []uint64 // from the start of the data
	total   int64
}

func newLayout(s Shape, o Options) (*layout, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if o.Type != F16 && o.Type != F32 {
		return nil, fmt.Errorf("weight type %v not supported (F16, F32)", o.Type)
	}
	l := &layout{tensors: s.tensors()}
	var off uint64
	for _, t := range l.tensors {
		typ := F32
		if t.matrix {
			typ = o.Type
		}
		l.types = append(l.types, typ)
		l.offsets = append(l.offsets, off)
		off += pad(t.elements() * typ.size())
	}
	var e enc
	e.u32(0x46554747) // "GGUF"
	e.u32(3)
	e.u64(uint64(len(l.tensors)))
	kvs := metadata(s, o)
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.key)
		e.value(kv.val)
	}
	for i, t := range l.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(l.types[i]))
		e.u64(l.offsets[i])
	}
	e.Write(make([]byte, pad(uint64(e.Len()))-uint64(e.Len())))
	l.header = e.Bytes()
	l.total = int64(len(l.header)) + int64(off)
	return l, nil
}

func pad(n uint64) uint64 { return (n + alignment - 1) / alignment * alignment }

// Write writes the model as a GGUF file to w.
func Write(w io.Writer, s Shape, o Options) error {
	l, err := newLayout(s, o)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	written := int64(0)
	report := func(n int) {
		written += int64(n)
		if o.Progress != nil {
			o.Progress(written, l.total)
		}
	}
	if _, err := bw.Write(l.header); err != nil {
		return err
	}
	report(len(l.header))
	f16s, f32s := valueTables()
	buf := make([]byte, chunkBytes)
	for i, t := range l.tensors {
		rng := splitmix{state: o.Seed ^ uint64(i+1)*0x9e3779b97f4a7c15}
		size := t.elements() * l.types[i].size()
		for done := uint64(0); done < size; {
			n := min(size-done, chunkBytes)
			b := buf[:n]
			switch {
			case t.norm:
				fillOnes(b)
			case l.types[i] == F16:
				fillF16(b, &rng, f16s)
			default:
				fillF32(b, &rng, f32s)
			}
			if _, err := bw.Write(b); err != nil {
				return err
			}
			done += n
			report(int(n))
		}
		if p := pad(size) - size; p > 0 {
			if _, err := bw.Write(make([]byte, p)); err != nil {
				return err
			}
			report(int(p))
		}
	}
	return bw.Flush()
}

// valueTables returns 2^tableBits weights uniform on [-a, a] (standard
// deviation weightStd) as F16 and F32 bit patterns.
func valueTables() (f16s []uint16, f32s []uint32) {
	n := 1 << tableBits
	a := weightStd * math.Sqrt(3)
	f16s, f32s = make([]uint16, n), make([]uint32, n)
	for i := range n {
		v := float32(a * (2*(float64(i)+0.5)/float64(n) - 1))
		f16s[i], f32s[i] = float16(v), math.Float32bits(v)
	}
	return f16s, f32s
}

// fillF16 fills b (even length) with random F16 values, five per draw.
func fillF16(b []byte, rng *splitmix, table []uint16) {
	const mask = 1<<tableBits - 1
	for len(b) >= 10 {
		x := rng.next()
		binary.LittleEndian.PutUint16(b[0:], table[x&mask])
		binary.LittleEndian.PutUint16(b[2:], table[x>>12&mask])
		binary.LittleEndian.PutUint16(b[4:], table[x>>24&mask])
		binary.LittleEndian.PutUint16(b[6:], table[x>>36&mask])
		binary.LittleEndian.PutUint16(b[8:], table[x>>48&mask])
		b = b[10:]
	}
	for len(b) >= 2 {
		binary.LittleEndian.PutUint16(b, table[rng.next()&mask])
		b = b[2:]
	}
}

// fillF32 fills b (length a multiple of 4) with random F32 values.
func fillF32(b []byte, rng *splitmix, table []uint32) {
	const mask = 1<<tableBits - 1
	for len(b) >= 20 {
		x := rng.next()
		binary.LittleEndian.PutUint32(b[0:], table[x&mask])
		binary.LittleEndian.PutUint32(b[4:], table[x>>12&mask])
		binary.LittleEndian.PutUint32(b[8:], table[x>>24&mask])
		binary.LittleEndian.PutUint32(b[12:], table[x>>36&mask])
		binary.LittleEndian.PutUint32(b[16:], table[x>>48&mask])
		b = b[20:]
	}
	for len(b) >= 4 {
		binary.LittleEndian.PutUint32(b, table[rng.next()&mask])
		b = b[4:]
	}
}

func fillOnes(b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(1))
	}
}

// float16 converts f to IEEE 754 half precision, rounding to nearest.
func float16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int(bits>>23&0xff) - 127 + 15
	mant := bits & 0x7fffff
	switch {
	case bits&0x7fffffff == 0:
		return sign
	case exp >= 31:
		return sign | 0x7c00 // too large: infinity
	case exp <= 0: // subnormal half
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		h := mant >> shift
		if mant>>(shift-1)&1 != 0 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(sign) | uint32(exp)<<10 | mant>>13
	if mant&0x1000 != 0 {
		h++ // may carry into the exponent, which is the right rounding
	}
	return uint16(h)
}

// splitmix is the splitmix64 generator: fast, and good enough for weights.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// enc builds the GGUF header.
type enc struct{ bytes.Buffer }

func (e *enc) u32(v uint32) { e.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *enc) u64(v uint64) { e.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *enc) str(s string) { e.u64(uint64(len(s))); e.WriteString(s) }

// GGUF value type codes.
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
)

func (e *enc) value(v any) {
	switch x := v.(type) {
	case uint32:
		e.u32(ggufUint32)
		e.u32(x)
	case float32:
		e.u32(ggufFloat32)
		e.u32(math.Float32bits(x))
	case bool:
		e.u32(ggufBool)
		if x {
			e.WriteByte(1)
		} else {
			e.WriteByte(0)
		}
	case string:
		e.u32(ggufString)
		e.str(x)
	case []string:
		e.u32(ggufArray)
		e.u32(ggufString)
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []float32:
		e.u32(ggufArray)
		e.u32(ggufFloat32)
		e.u64(uint64(len(x)))
		for _, f := range x {
			e.u32(math.Float32bits(f))
		}
	case []int32:
		e.u32(ggufArray)
		e.u32(ggufInt32)
		e.u64(uint64(len(x)))
		for _, i := range x {
			e.u32(uint32(i))
		}
	default:
		panic(fmt.Sprintf("synth: no GGUF encoding for %T", v))
	}
}

type kv struct {
	key string
	val any
}

// metadata returns the GGUF key/values of the model, in the order
// llama.cpp's converter writes them.
func metadata(s Shape, o Options) []kv {
	a := s.Arch
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if o.Type == F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	kvs := []kv{
		{"general.architecture", a},
		{"general.type", "model"},
		{"general.name", "synthetic " + s.Name},
		{"general.description", "meshllm synthetic model: real shape, random weights, no meaningful output"},
		{"general.file_type", fileType},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".context_length", uint32(s.Context)},
		{a + ".embedding_length", uint32(s.Embd)},
		{a + ".feed_forward_length", uint32(s.FFN)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.KVHeads)},
		{a + ".rope.freq_base", s.RopeBase},
		{a + ".attention.layer_norm_rms_epsilon", s.NormEps},
	}
	if a == "llama" {
		kvs = append(kvs,
			kv{a + ".rope.dimension_count", uint32(s.HeadDim())},
			kv{a + ".vocab_size", uint32(s.Vocab)},
		)
	}
	tokens, scores, types := vocab(s.Vocab, s.ControlTokens)
	kvs = append(kvs,
		kv{"tokenizer.ggml.model", "llama"},
		kv{"tokenizer.ggml.tokens", tokens},
		kv{"tokenizer.ggml.scores", scores},
		kv{"tokenizer.ggml.token_type", types},
		kv{"tokenizer.ggml.unknown_token_id", uint32(0)},
		kv{"tokenizer.ggml.bos_token_id", uint32(1)},
		kv{"tokenizer.ggml.eos_token_id", uint32(2)},
		kv{"tokenizer.ggml.add_bos_token", true},
		kv{"tokenizer.ggml.add_eos_token", false},
	)
	if s.ChatTemplate != "" {
		kvs = append(kvs, kv{"tokenizer.chat_template", s.ChatTemplate})
	}
	return kvs
}
