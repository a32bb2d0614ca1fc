package cache

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestHasherChains(t *testing.T) {
	h := NewHasher("model-a", 4)
	a := h.Chain(nil, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9})
	b := h.Chain(nil, []int32{1, 2, 3, 4, 5, 6, 7, 0})
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("chain lengths %d %d, want 2 2 (partial blocks are not hashed)", len(a), len(b))
	}
	if a[0] != b[0] || a[1] == b[1] {
		t.Fatalf("equal first blocks must hash equal, different second blocks differ: %v %v", a, b)
	}
	if c := NewHasher("model-b", 4).Chain(nil, []int32{1, 2, 3, 4}); c[0] == a[0] {
		t.Fatal("the model identity must seed the chain")
	}
	if c := NewHasher("model-a", 2).Chain(nil, []int32{1, 2, 3, 4}); c[1] == a[0] {
		t.Fatal("the block size must seed the chain")
	}
	// The same block after different prefixes hashes differently.
	x := h.Chain(nil, []int32{9, 9, 9, 9, 5, 6, 7, 8})
	if x[1] == a[1] {
		t.Fatal("a block's hash must depend on its prefix")
	}
}

func TestTreeBlocksMatchesPerHandleChains(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, b := range []int{1, 3, 4, 16} {
		h := NewHasher("m", b)
		tr := NewTree(6, 1000)
		m := newModel(6)
		for op := 0; op < 300; op++ {
			s := randSeq(r, m, 40)
			hd := Handle(r.IntN(6))
			tr.Set(hd, s, int64(op))
			m.seqs[hd], m.used[hd] = s, int64(op)
			want := map[Hash]int64{}
			for i, seq := range m.seqs {
				for _, x := range h.Chain(nil, seq) {
					if u, ok := want[x]; !ok || m.used[i] > u {
						want[x] = m.used[i]
					}
				}
			}
			got := tr.Blocks(h, nil)
			if len(got) != len(want) {
				t.Fatalf("B=%d op %d: %d blocks, want %d", b, op, len(got), len(want))
			}
			for _, blk := range got {
				if u, ok := want[blk.Hash]; !ok || u != blk.Used {
					t.Fatalf("B=%d op %d: block %v: want used %d (present %v)", b, op, blk, u, ok)
				}
			}
			// Recency order is prefix-closed: every block's parent comes first.
			sortBlocksByRecency(got)
			pos := map[Hash]int{}
			for i, blk := range got {
				pos[blk.Hash] = i
			}
			for _, seq := range m.seqs {
				ch := h.Chain(nil, seq)
				for i := 1; i < len(ch); i++ {
					if pos[ch[i-1]] > pos[ch[i]] {
						t.Fatalf("B=%d: recency order puts a block before its parent", b)
					}
				}
			}
		}
	}
}

func sampleDigests() []*Digest {
	bl := NewBloom(4, 10)
	for i := range 10 {
		bl.Add(Hash(i * 7919))
	}
	return []*Digest{
		{Kind: KindSnapshot, Peer: "p", Model: "", BlockSize: 1, Epoch: 1},
		{Kind: KindSnapshot, Peer: "12D3KooWpeer", Model: "sha256:abc", BlockSize: 16, Epoch: 1 << 60, Seq: 42, Held: 3,
			Hashes: []Hash{1, 2, 1<<64 - 1}},
		{Kind: KindSnapshot, Peer: "q", Model: "m", BlockSize: 16, Epoch: 7, Seq: 9, Held: 10, Filter: bl},
		{Kind: KindDelta, Peer: "q", Model: "m", BlockSize: 32, Epoch: 7, Seq: 10, Held: 11,
			Added: []Hash{5, 6}, Removed: []Hash{7}},
	}
}

func TestDigestRoundTrip(t *testing.T) {
	for _, d := range sampleDigests() {
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != d.EncodedSize() {
			t.Fatalf("EncodedSize %d, encoded %d", d.EncodedSize(), len(b))
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, d)
		}
		// Every strict prefix is rejected, and so is a trailing byte.
		for i := range len(b) {
			if _, err := Decode(b[:i]); err == nil {
				t.Fatalf("prefix of %d bytes accepted", i)
			}
		}
		if _, err := Decode(append(slices.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("trailing byte: %v", err)
		}
	}
}

func TestDigestRejects(t *testing.T) {
	bad := []*Digest{
		{Kind: 3, Peer: "p", BlockSize: 1},
		{Kind: KindDelta, Peer: "", BlockSize: 1},
		{Kind: KindDelta, Peer: "p", BlockSize: 0},
		{Kind: KindDelta, Peer: "p", BlockSize: MaxBlockSize + 1},
		{Kind: KindDelta, Peer: "p", BlockSize: 1, Hashes: []Hash{1}},
		{Kind: KindSnapshot, Peer: "p", BlockSize: 1, Added: []Hash{1}},
		{Kind: KindSnapshot, Peer: string(make([]byte, MaxPeerLen+1)), BlockSize: 1},
		{Kind: KindSnapshot, Peer: "p", BlockSize: 1, Hashes: make([]Hash, MaxHashes+1)},
	}
	for i, d := range bad {
		if _, err := d.MarshalBinary(); err == nil {
			t.Errorf("digest %d encoded", i)
		}
	}
	// A count that promises more than the bytes left is refused before any
	// allocation.
	d := &Digest{Kind: KindSnapshot, Peer: "p", BlockSize: 1}
	b, _ := d.MarshalBinary()
	b = append(b[:len(b)-1], 0xff, 0xff, 0x3f) // count = 1<<20 - 1, no bytes
	if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized count: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, d := range sampleDigests() {
		b, _ := d.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrTooLarge", err)
			}
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded digest does not encode: %v", err)
		}
		if !slices.Equal(b, data) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestBloomNoFalseNegativesAndRate(t *testing.T) {
	b := NewBloom(1000, 4000) // 16 bits per entry
	r := rand.New(rand.NewPCG(1, 1))
	in := make([]Hash, 4000)
	for i := range in {
		in[i] = Hash(r.Uint64())
		b.Add(in[i])
	}
	for _, h := range in {
		if !b.Has(h) {
			t.Fatal("false negative")
		}
	}
	fp := 0
	for range 100000 {
		if b.Has(Hash(r.Uint64())) {
			fp++
		}
	}
	rate, want := float64(fp)/100000, b.FalsePositiveRate(4000)
	if rate > 2*want+0.001 {
		t.Fatalf("false-positive rate %.5f, expected about %.5f", rate, want)
	}
}
