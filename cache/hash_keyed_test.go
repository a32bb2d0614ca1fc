package cache

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// keyedDigest is the snapshot a Source keyed with key (nil: unkeyed)
// advertises for a cache holding seq.
func keyedDigest(t *testing.T, peer string, key []byte, seq []int32) *Digest {
	t.Helper()
	src, err := NewSource(SourceConfig{Peer: peer, Model: "m", BlockSize: 4, Epoch: 1, HashKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tree := NewTree(2, 1<<10)
	tree.Set(0, seq, 1)
	d, ok := src.Update(tree)
	if !ok || len(d.Added)+len(d.Hashes) == 0 {
		t.Fatalf("no digest: %+v", d)
	}
	return src.Snapshot()
}

func shared(a, b *Digest) int {
	in := map[Hash]bool{}
	for _, h := range a.Hashes {
		in[h] = true
	}
	n := 0
	for _, h := range b.Hashes {
		if in[h] {
			n++
		}
	}
	return n
}

// TestKeyedSourcesAgreeOnlyWithTheirKey: two sources with the same key
// advertise the same hashes for the same cache; with another key, or none,
// they share none, so an outsider cannot test a guessed prompt against a
// private mesh's digests.
func TestKeyedSourcesAgreeOnlyWithTheirKey(t *testing.T) {
	seq := make([]int32, 64) // 16 blocks
	for i := range seq {
		seq[i] = int32(7 + i*13)
	}
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)
	a, b := keyedDigest(t, "A", k1, seq), keyedDigest(t, "B", k1, seq)
	if len(a.Hashes) != 16 || shared(a, b) != 16 {
		t.Fatalf("same key: %d hashes, %d shared, want 16 and 16", len(a.Hashes), shared(a, b))
	}
	other, open := keyedDigest(t, "C", k2, seq), keyedDigest(t, "D", nil, seq)
	for name, d := range map[string]*Digest{"another key": other, "no key": open} {
		if n := shared(a, d); n != 0 {
			t.Errorf("%s shares %d of 16 hashes with the keyed digest", name, n)
		}
	}
	// The unkeyed hashes are what anyone computes from the guessed prompt.
	if got := NewHasher("m", 4).Chain(nil, seq); shared(open, &Digest{Hashes: got}) != 16 {
		t.Fatal("an unkeyed source does not advertise NewHasher's chain")
	}
	if got := NewHasher("m", 4).Chain(nil, seq); shared(a, &Digest{Hashes: got}) != 0 {
		t.Fatal("a guessed prompt's unkeyed chain matches the keyed digest")
	}
}

// TestKeyedViewMatchesKeyedPeers: a view keyed like its peers finds their
// prefixes; an unkeyed view (an outsider holding the digest) finds none.
func TestKeyedViewMatchesKeyedPeers(t *testing.T) {
	seq := make([]int32, 64)
	for i := range seq {
		seq[i] = int32(5 + i*11)
	}
	key := bytes.Repeat([]byte{9}, 32)
	d := keyedDigest(t, "A", key, seq)
	kh, err := NewKeyedHasher("m", 4, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    Hasher
		want int
	}{{"member", kh, 64}, {"outsider", NewHasher("m", 4), 0}} {
		v := NewClusterViewHasher(c.h, "m", ViewLimits{})
		if _, err := v.Apply(d, 1); err != nil {
			t.Fatal(err)
		}
		var s Scores
		v.Score(seq, nil, 1, &s)
		if len(s.Peers) != 1 || s.Peers[0].Tokens != c.want {
			t.Errorf("%s view: %+v, want %d tokens on A", c.name, s.Peers, c.want)
		}
	}
}

func TestKeyedHasherKeys(t *testing.T) {
	if _, err := NewKeyedHasher("m", 4, []byte("short")); !errors.Is(err, ErrHashKey) {
		t.Fatalf("short key: %v", err)
	}
	h, err := NewKeyedHasher("m", 4, nil)
	if err != nil || h.Keyed() || h != NewHasher("m", 4) {
		t.Fatalf("no key: %v keyed=%v", err, h.Keyed())
	}
	// The key is bound to the model and block size as well.
	key := bytes.Repeat([]byte{3}, 32)
	seq := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	a, _ := NewKeyedHasher("m", 4, key)
	b, _ := NewKeyedHasher("n", 4, key)
	if a.Chain(nil, seq)[0] == b.Chain(nil, seq)[0] {
		t.Fatal("two models share keyed hashes")
	}
	if !a.Keyed() || a.Chain(nil, seq)[1] != a.Next(uint64(a.Chain(nil, seq)[0]), seq[4:]) {
		t.Fatal("a keyed chain is not its Next steps")
	}
}

func BenchmarkKeyedHasherChain(b *testing.B) {
	seq := make([]int32, 4096)
	for i := range seq {
		seq[i] = int32(i)
	}
	key := bytes.Repeat([]byte{1}, 32)
	kh, _ := NewKeyedHasher("m", DefaultBlockSize, key)
	for _, c := range []struct {
		name string
		h    Hasher
	}{{"unkeyed", NewHasher("m", DefaultBlockSize)}, {"keyed", kh}} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]Hash, 0, len(seq)/DefaultBlockSize)
			b.SetBytes(int64(4 * len(seq)))
			for b.Loop() {
				dst = c.h.Chain(dst[:0], seq)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(seq)/DefaultBlockSize), "ns/block")
		})
	}
}

// TestSipHashVectors checks sipHash24 against OpenSSL's SIPHASH (`openssl
// mac -macopt hexkey:000102030405060708090a0b0c0d0e0f -macopt size:8
// SIPHASH` of the bytes 0, 1, ..., n-1), the reference vectors.
func TestSipHashVectors(t *testing.T) {
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	for n, want := range map[int]string{0: "310E0EDD47DB6F72", 1: "FD67DC93C539F874", 7: "37D1018BF50002AB",
		8: "6224939A79F5F593", 15: "E545BE4961CA29A1", 16: "DB9BC2577FCC2A3F", 17: "9447BE2CF5E99A69", 63: "724506EB4C328A95"} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(i)
		}
		got := binary.LittleEndian.AppendUint64(nil, sipHash24(k0, k1, msg))
		if s := strings.ToUpper(hex.EncodeToString(got)); s != want {
			t.Errorf("SipHash-2-4 of %d bytes = %s, want %s", n, s, want)
		}
	}
}
