package cache

import (
	"fmt"
	"math/bits"
)

// Hash is the chain hash of a block: it identifies the block's tokens and
// every token before them, for one model and block size.
type Hash uint64

// Hasher computes block-hash chains. A sequence is cut into blocks of
// BlockSize tokens; block i's hash mixes block i-1's hash (the seed for the
// first block) with block i's tokens, so equal hashes mean equal prefixes.
// Only full blocks are hashed: a trailing partial block is not advertised.
//
// The function is a 64-bit xxHash-style construction (a multiply-rotate
// round per two tokens, then an avalanche), fixed here so that every peer
// computes the same chains; it is not cryptographic. Peers must not trust a
// digest for anything but routing hints: a wrong hint costs speed only.
//
// A keyed Hasher (NewKeyedHasher) also passes each block's hash through a
// keyed pseudorandom function (SipHash-2-4), so that only holders of the
// key can compute the hashes of a guessed prompt.
//
// A Hasher is an immutable value, safe for concurrent use.
type Hasher struct {
	seed uint64
	b    int
	// k0, k1 are the SipHash key of a keyed Hasher (NewKeyedHasher).
	k0, k1 uint64
	keyed  bool
}

// MaxBlockSize bounds the block size digests may carry.
const MaxBlockSize = 4096

// NewHasher returns the Hasher for a model (its identity, as
// infer.ModelInfo.ID gives it) and a block size in tokens.
func NewHasher(model string, blockSize int) Hasher {
	if blockSize <= 0 || blockSize > MaxBlockSize {
		panic(fmt.Sprintf("cache: block size %d out of range 1..%d", blockSize, MaxBlockSize))
	}
	// FNV-1a of the model identity, then the block size, then an avalanche.
	s := uint64(14695981039346656037)
	for i := 0; i < len(model); i++ {
		s ^= uint64(model[i])
		s *= 1099511628211
	}
	s = avalanche(s ^ uint64(blockSize)*prime3)
	return Hasher{seed: s, b: blockSize}
}

// BlockSize returns the number of tokens per block.
func (h Hasher) BlockSize() int { return h.b }

// Seed returns the hash that precedes the first block.
func (h Hasher) Seed() uint64 { return h.seed }

const (
	prime1 uint64 = 11400714785074694791
	prime2 uint64 = 14029467366897019727
	prime3 uint64 = 1609587929392839161
	prime4 uint64 = 9650029242287828579
)

func round(acc, v uint64) uint64 {
	return bits.RotateLeft64(acc+v*prime2, 31) * prime1
}

func avalanche(x uint64) uint64 {
	x ^= x >> 33
	x *= prime2
	x ^= x >> 29
	x *= prime3
	x ^= x >> 32
	return x
}

// Next returns the hash of block following prev (the Seed for the first
// block). block should hold BlockSize tokens.
func (h Hasher) Next(prev uint64, block []int32) Hash {
	acc := round(prev^prime4, h.seed)
	i := 0
	for ; i+1 < len(block); i += 2 {
		acc = round(acc, uint64(uint32(block[i]))|uint64(uint32(block[i+1]))<<32)
	}
	if i < len(block) {
		acc = round(acc, uint64(uint32(block[i]))|1<<63)
	}
	x := avalanche(acc)
	if h.keyed {
		x = h.seal(x)
	}
	return Hash(x)
}

// Chain appends to dst the hashes of seq's full blocks and returns it.
func (h Hasher) Chain(dst []Hash, seq []int32) []Hash {
	prev := h.seed
	for i := 0; i+h.b <= len(seq); i += h.b {
		x := h.Next(prev, seq[i:i+h.b])
		dst = append(dst, x)
		prev = uint64(x)
	}
	return dst
}
