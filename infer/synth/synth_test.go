package synth

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
)

func TestWriteTinyReadBack(t *testing.T) {
	s, err := LookupShape("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	var last, total int64
	err = WriteFile(path, s, Options{Type: F16, Seed: 1, Progress: func(w, tot int64) {
		if w < last {
			t.Errorf("progress went back: %d < %d", w, last)
		}
		last, total = w, tot
	}})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := Size(s, Options{Type: F16})
	if fi.Size() != size || last != size || total != size {
		t.Errorf("file %d bytes, Size %d, progress %d/%d", fi.Size(), size, last, total)
	}
	g, err := infer.ReadGGUFFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := g.Meta()
	want := infer.ModelMeta{
		Name: "synthetic tiny", Architecture: "llama", ContextLength: 2048, VocabSize: 512,
		Parameters: s.Parameters(), FileType: "F16", TokenizerModel: "llama", BOS: 1, EOS: 2, AddBOS: true,
		EmbeddingLength: 64, BlockCount: 2, HeadCount: 4, HeadCountKV: 2, FeedForwardLength: 192,
		// Not in the file: derived as llama.cpp does (head width), and -1
		// for "no pooling type given".
		KeyLength: 16, ValueLength: 16, RopeDimensions: 16, PoolingType: -1,
		Tensors: 2 + 9*2 + 1,
	}
	if m != want {
		t.Errorf("meta:\n got %+v\nwant %+v", m, want)
	}
	// Tensors are aligned, in order, and end exactly at the end of the file.
	end := uint64(0)
	for _, ti := range g.Tensors {
		if ti.Offset%32 != 0 || ti.Offset < end {
			t.Errorf("%s at %d (previous end %d)", ti.Name, ti.Offset, end)
		}
		es := uint64(4)
		if ti.Type == 1 {
			es = 2
		}
		end = ti.Offset + ti.Elements()*es
	}
	if got := uint64(g.DataOffset) + (end+31)/32*32; got != uint64(fi.Size()) {
		t.Errorf("data ends at %d, file is %d bytes", got, fi.Size())
	}
	if g.Uint("llama.rope.dimension_count") != 16 || g.KV["llama.rope.freq_base"] != float32(10000) {
		t.Errorf("rope metadata: %v %v", g.KV["llama.rope.dimension_count"], g.KV["llama.rope.freq_base"])
	}
	// The file's identity is stable and seed-dependent.
	id1, err := infer.ModelID(path)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "tiny2.gguf")
	if err := WriteFile(other, s, Options{Type: F16, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	if id2, _ := infer.ModelID(other); id2 == id1 {
		t.Error("different seeds, same model id")
	}
}

func TestWriteDeterministic(t *testing.T) {
	s, _ := LookupShape("tiny")
	sum := func(o Options) [32]byte {
		var b bytes.Buffer
		if err := Write(&b, s, o); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b.Bytes())
	}
	a, b, c := sum(Options{Type: F32, Seed: 5}), sum(Options{Type: F32, Seed: 5}), sum(Options{Type: F32, Seed: 6})
	if a != b || a == c {
		t.Error("equal seeds must give equal files, different seeds different ones")
	}
}

func TestWeightsLookRandom(t *testing.T) {
	s, _ := LookupShape("tiny")
	var b bytes.Buffer
	if err := Write(&b, s, Options{Type: F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	g, err := infer.ReadGGUF(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()[g.DataOffset:]
	for _, ti := range g.Tensors {
		vals := make([]float32, ti.Elements())
		if err := readF32(data[ti.Offset:], vals); err != nil {
			t.Fatal(err)
		}
		var sum, sq float64
		for _, v := range vals {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		n := float64(len(vals))
		mean, std := sum/n, sqrt(sq/n-(sum/n)*(sum/n))
		isNorm := bytes.HasSuffix([]byte(ti.Name), []byte("norm.weight"))
		switch {
		case isNorm && (mean != 1 || std != 0):
			t.Errorf("%s: norm gains mean %g std %g, want 1, 0", ti.Name, mean, std)
		case !isNorm && n > 1000 && (std < 0.018 || std > 0.022 || mean > 0.002 || mean < -0.002):
			t.Errorf("%s: mean %g std %g, want 0, 0.02", ti.Name, mean, std)
		}
	}
}

func TestShapeParameters(t *testing.T) {
	// Model cards: Qwen2.5-0.5B has 494,032,768 parameters (0.49B) and
	// Llama-3.2-1B 1,235,814,400 (1.24B), both with tied embeddings.
	for name, want := range map[string]uint64{"qwen2.5-0.5b": 494032768, "llama3.2-1b": 1235814400} {
		s, err := LookupShape(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Parameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
		if got := infer.DetectChatTemplate(s.ChatTemplate); got == infer.TemplatePlain {
			t.Errorf("%s: chat template not recognised", name)
		}
	}
	if _, err := LookupShape("gpt-5"); err == nil {
		t.Error("unknown shape found")
	}
	bad := Shapes()[0]
	bad.Heads = 3
	if bad.Validate() == nil {
		t.Error("64 wide with 3 heads validated")
	}
	if _, err := Size(bad, Options{}); err == nil {
		t.Error("Size of an invalid shape")
	}
}

func TestVocab(t *testing.T) {
	for _, n := range []int{minVocab + 3, 512, 151936} {
		control := []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>"}
		toks, scores, types := vocab(n, control)
		if len(toks) != n || len(scores) != n || len(types) != n {
			t.Fatalf("vocab(%d): %d tokens %d scores %d types", n, len(toks), len(scores), len(types))
		}
		seen := map[string]bool{}
		for i, tok := range toks {
			if seen[tok] {
				t.Fatalf("vocab(%d): %q twice", n, tok)
			}
			seen[tok] = true
			if i >= 1 && types[i] == tokNormal && scores[i] >= scores[i-1] && types[i-1] == tokNormal {
				t.Fatalf("scores not decreasing at %d", i)
			}
		}
		if toks[0] != "<unk>" || toks[1] != "<s>" || toks[2] != "</s>" || toks[3] != "<0x00>" || toks[258] != "<0xFF>" || types[100] != tokByte {
			t.Errorf("vocab(%d): fixed tokens wrong", n)
		}
		if toks[n-1] != "<|endoftext|>" || types[n-1] != tokControl {
			t.Errorf("vocab(%d): control tokens not last", n)
		}
	}
}

func TestFloat16(t *testing.T) {
	for f, want := range map[float32]uint16{
		0: 0, 1: 0x3c00, -2: 0xc000, 0.5: 0x3800, 65504: 0x7bff, 1e6: 0x7c00,
		6.1035156e-05: 0x0400, // smallest normal
		5.9604645e-08: 0x0001, // smallest subnormal
		1e-9:          0,
		0.1:           0x2e66,
		-0.033:        0xa839,
	} {
		if got := float16(f); got != want {
			t.Errorf("float16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

func TestParseType(t *testing.T) {
	if ty, err := ParseType("f16"); err != nil || ty != F16 || ty.String() != "F16" {
		t.Error("f16")
	}
	if _, err := ParseType("q4_0"); err == nil {
		t.Error("q4_0 accepted")
	}
	s, _ := LookupShape("tiny")
	if err := Write(io.Discard, s, Options{Type: Type(8)}); err == nil {
		t.Error("Q8_0 written")
	}
}

// BenchmarkWriteQwen writes the qwen2.5-0.5b shape (about 1 GB at F16) to
// io.Discard: the cost of `meshllm model synth` without the disk.
func BenchmarkWriteQwen(b *testing.B) {
	s, _ := LookupShape("qwen2.5-0.5b")
	size, _ := Size(s, Options{Type: F16})
	b.SetBytes(size)
	for b.Loop() {
		if err := Write(io.Discard, s, Options{Type: F16}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteQwenFile writes the full qwen2.5-0.5b shape to disk and times
// it and the model identity. Opt in: MESHLLM_SYNTH_BIG=1 (about 1 GB).
func TestWriteQwenFile(t *testing.T) {
	if os.Getenv("MESHLLM_SYNTH_BIG") == "" {
		t.Skip("set MESHLLM_SYNTH_BIG=1 to write a 1 GB model")
	}
	s, _ := LookupShape("qwen2.5-0.5b")
	path := filepath.Join(t.TempDir(), "qwen.gguf")
	start := time.Now()
	if err := WriteFile(path, s, Options{Type: F16}); err != nil {
		t.Fatal(err)
	}
	wrote := time.Since(start)
	start = time.Now()
	id, err := infer.ModelID(path)
	if err != nil {
		t.Fatal(err)
	}
	idTime := time.Since(start)
	m, err := infer.ReadModelMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	t.Logf("qwen2.5-0.5b F16: %d bytes written in %v; ModelID %s… in %v; meta %+v", fi.Size(), wrote, id[:12], idTime, m)
	if m.Parameters != 494032768 || m.VocabSize != 151936 || m.Architecture != "qwen2" {
		t.Errorf("meta %+v", m)
	}
}
