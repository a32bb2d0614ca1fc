package infer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const stories = "../../shared/models/stories260K.gguf"

func storiesPath(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(stories); err != nil {
		t.Skipf("stories260K not present: %v", err)
	}
	return stories
}

func TestReadModelMetaStories(t *testing.T) {
	m, err := ReadModelMeta(storiesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	want := ModelMeta{
		Name: "llama", Architecture: "llama", ContextLength: 2048, VocabSize: 512,
		Parameters: 292800, FileType: "F32", TokenizerModel: "llama", BOS: 1, EOS: 2, AddBOS: true,
		EmbeddingLength: 64, BlockCount: 5, HeadCount: 8, HeadCountKV: 4, FeedForwardLength: 172,
		KeyLength: 8, ValueLength: 8, RopeDimensions: 8, PoolingType: -1,
		Tensors: 48,
	}
	if m != want {
		t.Errorf("meta:\n got %+v\nwant %+v", m, want)
	}
}

// ggufEnc builds GGUF headers for tests.
type ggufEnc struct{ bytes.Buffer }

func (e *ggufEnc) u32(v uint32) { binary.Write(&e.Buffer, binary.LittleEndian, v) }
func (e *ggufEnc) u64(v uint64) { binary.Write(&e.Buffer, binary.LittleEndian, v) }
func (e *ggufEnc) str(s string) { e.u64(uint64(len(s))); e.WriteString(s) }

func (e *ggufEnc) header(version uint32, tensors, kvs uint64) {
	e.u32(GGUFMagic)
	e.u32(version)
	e.u64(tensors)
	e.u64(kvs)
}

// sampleHeader encodes one key of every value type and two tensors.
func sampleHeader() []byte {
	var e ggufEnc
	e.header(3, 2, 15)
	kv := func(k string, typ uint32, f func()) { e.str(k); e.u32(typ); f() }
	kv("u8", GGUFTypeUint8, func() { e.WriteByte(200) })
	kv("i8", GGUFTypeInt8, func() { e.WriteByte(0xff) })
	kv("u16", GGUFTypeUint16, func() { binary.Write(&e, binary.LittleEndian, uint16(60000)) })
	kv("i16", GGUFTypeInt16, func() { binary.Write(&e, binary.LittleEndian, int16(-3)) })
	kv("general.alignment", GGUFTypeUint32, func() { e.u32(64) })
	kv("i32", GGUFTypeInt32, func() { binary.Write(&e, binary.LittleEndian, int32(-5)) })
	kv("f32", GGUFTypeFloat32, func() { e.u32(math.Float32bits(1.5)) })
	kv("b", GGUFTypeBool, func() { e.WriteByte(1) })
	kv("general.architecture", GGUFTypeString, func() { e.str("qwen2") })
	kv("u64", GGUFTypeUint64, func() { e.u64(1 << 40) })
	kv("i64", GGUFTypeInt64, func() { e.u64(math.MaxUint64) })
	kv("f64", GGUFTypeFloat64, func() { e.u64(math.Float64bits(-2.25)) })
	kv("tokenizer.ggml.tokens", GGUFTypeArray, func() {
		e.u32(GGUFTypeString)
		e.u64(3)
		e.str("<unk>")
		e.str("<s>")
		e.str("</s>")
	})
	kv("qwen2.attention.head_count", GGUFTypeArray, func() {
		e.u32(GGUFTypeUint32)
		e.u64(3)
		e.u32(4)
		e.u32(14)
		e.u32(2)
	})
	kv("nested", GGUFTypeArray, func() {
		e.u32(GGUFTypeArray)
		e.u64(1)
		e.u32(GGUFTypeInt32)
		e.u64(2)
		e.u32(7)
		e.u32(8)
	})
	e.str("token_embd.weight")
	e.u32(2)
	e.u64(8)
	e.u64(3)
	e.u32(1)
	e.u64(0)
	e.str("output_norm.weight")
	e.u32(1)
	e.u64(8)
	e.u32(0)
	e.u64(64)
	return e.Bytes()
}

func TestReadGGUFAllTypes(t *testing.T) {
	b := sampleHeader()
	g, err := ReadGGUF(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"u8": uint8(200), "i8": int8(-1), "u16": uint16(60000), "i16": int16(-3),
		"general.alignment": uint32(64), "i32": int32(-5), "f32": float32(1.5), "b": true,
		"general.architecture": "qwen2", "u64": uint64(1 << 40), "i64": int64(-1), "f64": -2.25,
		"tokenizer.ggml.tokens":      []string{"<unk>", "<s>", "</s>"},
		"qwen2.attention.head_count": []uint32{4, 14, 2},
		"nested":                     []any{[]int32{7, 8}},
	}
	if !reflect.DeepEqual(g.KV, want) {
		t.Errorf("kv:\n got %#v\nwant %#v", g.KV, want)
	}
	if len(g.Keys) != 15 || g.Keys[0] != "u8" || g.Keys[14] != "nested" {
		t.Errorf("keys out of order: %v", g.Keys)
	}
	if g.Alignment != 64 || g.DataOffset%64 != 0 || g.DataOffset < int64(len(b)) || g.DataOffset >= int64(len(b))+64 {
		t.Errorf("alignment %d, data offset %d for a %d-byte header", g.Alignment, g.DataOffset, len(b))
	}
	m := g.Meta()
	if m.Architecture != "qwen2" || m.VocabSize != 3 || m.HeadCount != 14 || m.HeadCountKV != 14 ||
		m.Parameters != 32 || m.FileType != "F16" || m.BOS != -1 || m.AddBOS {
		t.Errorf("meta: %+v", m)
	}
}

func TestReadGGUFErrors(t *testing.T) {
	good := sampleHeader()
	if _, err := ReadGGUF(bytes.NewReader([]byte("GGML...."))); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("bad magic: %v", err)
	}
	if _, err := ReadGGUF(bytes.NewReader(nil)); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("empty: %v", err)
	}
	for n := 4; n < len(good); n += 7 {
		if _, err := ReadGGUF(bytes.NewReader(good[:n])); err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
	}
	v1 := bytes.Clone(good)
	binary.LittleEndian.PutUint32(v1[4:], 1)
	if _, err := ReadGGUF(bytes.NewReader(v1)); err == nil {
		t.Error("version 1 accepted")
	}
	var huge ggufEnc
	huge.header(3, 0, 1)
	huge.str("k")
	huge.u32(GGUFTypeString)
	huge.u64(1 << 62)
	if _, err := ReadGGUF(bytes.NewReader(huge.Bytes())); err == nil {
		t.Error("2^62-byte string accepted")
	}
	var lying ggufEnc // claims a 32 MiB string, holds 3 bytes
	lying.header(3, 0, 1)
	lying.str("k")
	lying.u32(GGUFTypeString)
	lying.u64(32 << 20)
	lying.WriteString("abc")
	if _, err := ReadGGUF(bytes.NewReader(lying.Bytes())); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short string: %v", err)
	}
}

func FuzzReadGGUF(f *testing.F) {
	f.Add(sampleHeader())
	if b, err := os.ReadFile(stories); err == nil {
		f.Add(b[:16<<10])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ReadGGUF(bytes.NewReader(b))
		if err != nil {
			return
		}
		if g.DataOffset < 24 || uint64(g.DataOffset)%g.Alignment != 0 {
			t.Fatalf("data offset %d, alignment %d", g.DataOffset, g.Alignment)
		}
		if len(g.Keys) != len(g.KV) {
			t.Fatalf("%d keys, %d values", len(g.Keys), len(g.KV))
		}
		_ = g.Meta()
	})
}

func TestModelID(t *testing.T) {
	src, err := os.ReadFile(storiesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id := func(p string) string {
		s, err := ModelID(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := id(stories)
	if len(base) != 64 {
		t.Fatalf("id %q", base)
	}
	if got := id(write("copy.gguf", src)); got != base {
		t.Error("a byte-identical copy has another id")
	}
	g, _ := ReadGGUF(bytes.NewReader(src))
	tok := bytes.Index(src, []byte("<0x41>"))
	mutations := map[string]int{
		"tokenizer":    tok + 4,               // <0x41> -> <0x42>
		"first weight": int(g.DataOffset) + 1, // inside the first chunk
		"last weight":  len(src) - 3,          // the last chunk ends at EOF
	}
	for name, at := range mutations {
		b := bytes.Clone(src)
		b[at]++
		if id(write(name+".gguf", b)) == base {
			t.Errorf("changing the %s did not change the id", name)
		}
	}
	if id(write("longer.gguf", append(bytes.Clone(src), 0))) == base {
		t.Error("a longer file has the same id")
	}
	if _, err := ModelID(write("trunc.gguf", src[:1000])); err == nil {
		t.Error("truncated file accepted")
	}
	if _, err := ModelID(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSampleOffsets(t *testing.T) {
	for _, c := range []struct{ start, end int64 }{{0, 0}, {10, 11}, {32, 32 + 3*100}, {32, 32 + 64*100}, {32, 32 + 64*100 + 1}, {1000, 1 << 40}} {
		offs := sampleOffsets(c.start, c.end, 64, 100)
		if c.end <= c.start {
			if offs != nil {
				t.Errorf("%v: %v", c, offs)
			}
			continue
		}
		if len(offs) > 64 || offs[0] != c.start || offs[len(offs)-1]+100 < c.end {
			t.Errorf("%v: first %d last %d n %d", c, offs[0], offs[len(offs)-1], len(offs))
		}
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] || offs[i] > c.end {
				t.Errorf("%v: offsets not increasing inside the range: %v", c, offs)
				break
			}
		}
	}
}

func BenchmarkReadGGUF(b *testing.B) {
	src, err := os.ReadFile(storiesPath(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := ReadGGUF(bytes.NewReader(src)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkModelID(b *testing.B) {
	p := storiesPath(b)
	for b.Loop() {
		if _, err := ModelID(p); err != nil {
			b.Fatal(err)
		}
	}
}
