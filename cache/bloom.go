package cache

import "math"

// Bloom is a Bloom filter over chain hashes, the digest form of a cache that
// holds more blocks than the digest may list. It answers "maybe held" with a
// false-positive rate set by its bits per entry and never answers "not held"
// for an entry it holds. Chain hashes are already uniform, so the k probe
// positions come from the hash itself by double hashing.
//
// A Bloom is not safe for concurrent mutation; concurrent Has calls on a
// filter nobody modifies are safe.
type Bloom struct {
	k    int
	bits []uint64
}

// MaxBloomHashes bounds the probes per entry a filter may use.
const MaxBloomHashes = 16

// NewBloom returns an empty filter of words 64-bit words, using the number
// of probes that minimises false positives for n entries.
func NewBloom(words, n int) *Bloom {
	words = max(words, 1)
	k := 1
	if n > 0 {
		k = int(math.Round(float64(words*64) / float64(n) * math.Ln2))
	}
	return &Bloom{k: min(max(k, 1), MaxBloomHashes), bits: make([]uint64, words)}
}

// K returns the number of probes per entry.
func (b *Bloom) K() int { return b.k }

// Words returns the filter's size in 64-bit words.
func (b *Bloom) Words() int { return len(b.bits) }

func (b *Bloom) probes(h Hash) (h1, h2, m uint64) {
	return uint64(h) & 0xffffffff, uint64(h)>>32 | 1, uint64(len(b.bits)) * 64
}

// Add inserts h.
func (b *Bloom) Add(h Hash) {
	h1, h2, m := b.probes(h)
	for i := range uint64(b.k) {
		p := (h1 + i*h2) % m
		b.bits[p/64] |= 1 << (p % 64)
	}
}

// Has reports whether h may have been added.
func (b *Bloom) Has(h Hash) bool {
	h1, h2, m := b.probes(h)
	for i := range uint64(b.k) {
		p := (h1 + i*h2) % m
		if b.bits[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// FalsePositiveRate estimates the filter's false-positive rate after n
// distinct insertions.
func (b *Bloom) FalsePositiveRate(n int) float64 {
	m := float64(len(b.bits) * 64)
	return math.Pow(1-math.Exp(-float64(b.k)*float64(n)/m), float64(b.k))
}
