package cache

import (
	"fmt"
	"slices"
)

// Overflow is what a Source advertises when its cache holds more blocks
// than SourceConfig.MaxBlocks.
type Overflow uint8

const (
	// KeepRecent advertises the MaxBlocks most recently used blocks (a
	// prefix-closed set): peers underestimate matches on older prefixes.
	KeepRecent Overflow = iota
	// UseBloom advertises every block in snapshots as a Bloom filter of
	// MaxBlocks x 64 bits (the bytes of MaxBlocks hashes); deltas stay exact.
	// Peers may overestimate a match by the filter's false positives.
	UseBloom
)

func (o Overflow) String() string {
	switch o {
	case KeepRecent:
		return "recent"
	case UseBloom:
		return "bloom"
	}
	return fmt.Sprintf("Overflow(%d)", uint8(o))
}

// DefaultMaxBlocks is the default digest cap: 16,384 blocks, a 128 KiB
// snapshot; at the default block size that is 256k tokens of cache.
const DefaultMaxBlocks = 16384

// DefaultBlockSize is the default block size in tokens; docs/digests.md
// has the measurement behind it.
const DefaultBlockSize = 16

// SourceConfig configures a Source.
type SourceConfig struct {
	Peer      string // this peer's ID
	Model     string // model identity; seeds the hashes
	BlockSize int    // tokens per block; 0 means DefaultBlockSize
	// Epoch must grow across restarts and cache resets of this peer (its
	// start time in nanoseconds will do). 0 is not allowed.
	Epoch uint64
	// MaxBlocks caps the hashes a snapshot lists; 0 means DefaultMaxBlocks.
	MaxBlocks int
	// Overflow is the policy when the cache holds more than MaxBlocks.
	Overflow Overflow
	// HashKey keys the block hashes (NewKeyedHasher), so that only its
	// holders can tell which prompts the digests list. Every peer of one
	// private mesh must use the same key (cmd/meshllm derives it from the
	// mesh key), and their ClusterViews the same (NewClusterViewHasher),
	// or no prefix matches. nil: unkeyed hashes, which anyone with the
	// model can compute for a guessed prompt (an open mesh).
	HashKey []byte
}

// Source turns the states of a peer's Tree into digests: it remembers what
// it last advertised, and Update returns the delta to the tree's current
// state. Not safe for concurrent use; call it from the goroutine owning the
// Tree.
type Source struct {
	cfg    SourceConfig
	hasher Hasher
	seq    uint64
	held   int
	adv    map[Hash]struct{} // what peers are told the cache holds
	blocks []Block           // scratch
}

// NewSource returns a Source at (cfg.Epoch, 0) advertising an empty cache.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.MaxBlocks == 0 {
		cfg.MaxBlocks = DefaultMaxBlocks
	}
	switch {
	case cfg.Epoch == 0:
		return nil, fmt.Errorf("cache: SourceConfig.Epoch must be > 0")
	case cfg.MaxBlocks < 0 || cfg.MaxBlocks > MaxHashes:
		return nil, fmt.Errorf("cache: MaxBlocks %d out of range 1..%d", cfg.MaxBlocks, MaxHashes)
	case cfg.Overflow > UseBloom:
		return nil, fmt.Errorf("cache: unknown overflow policy %d", cfg.Overflow)
	}
	d := Digest{Kind: KindSnapshot, Peer: cfg.Peer, Model: cfg.Model, BlockSize: cfg.BlockSize}
	if cfg.BlockSize > MaxBlockSize {
		return nil, fmt.Errorf("cache: block size %d over %d", cfg.BlockSize, MaxBlockSize)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	h, err := NewKeyedHasher(cfg.Model, cfg.BlockSize, cfg.HashKey)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, hasher: h, adv: map[Hash]struct{}{}}, nil
}

// Hasher returns the hasher the source's digests use.
func (s *Source) Hasher() Hasher { return s.hasher }

// Seq returns the sequence number of the current state.
func (s *Source) Seq() uint64 { return s.seq }

// Advertised returns how many hashes the current state advertises exactly.
func (s *Source) Advertised() int { return len(s.adv) }

// Update compares the tree's blocks with the last state and, if they
// differ, moves to the next sequence number and returns the message to
// publish: a delta, or a snapshot when that is smaller than the delta. ok is
// false when nothing changed. The cost is that of Tree.Blocks plus a map
// diff of the advertised sets.
func (s *Source) Update(t *Tree) (d *Digest, ok bool) {
	s.blocks = t.Blocks(s.hasher, s.blocks[:0])
	held := len(s.blocks)
	next := s.blocks
	if held > s.cfg.MaxBlocks && s.cfg.Overflow == KeepRecent {
		sortBlocksByRecency(next)
		next = next[:s.cfg.MaxBlocks]
	}
	var added, removed []Hash
	in := make(map[Hash]struct{}, len(next))
	for _, b := range next {
		in[b.Hash] = struct{}{}
		if _, ok := s.adv[b.Hash]; !ok {
			added = append(added, b.Hash)
		}
	}
	for h := range s.adv {
		if _, ok := in[h]; !ok {
			removed = append(removed, h)
		}
	}
	if len(added) == 0 && len(removed) == 0 && held == s.held {
		return nil, false
	}
	slices.Sort(added)
	slices.Sort(removed)
	s.adv, s.held = in, held
	s.seq++
	if len(added)+len(removed) > s.snapshotLen() {
		return s.Snapshot(), true
	}
	return s.header(KindDelta, added, removed), true
}

// snapshotLen is the number of 8-byte words the current snapshot carries.
func (s *Source) snapshotLen() int {
	if len(s.adv) > s.cfg.MaxBlocks {
		return s.cfg.MaxBlocks
	}
	return len(s.adv)
}

func (s *Source) header(k Kind, added, removed []Hash) *Digest {
	return &Digest{Kind: k, Peer: s.cfg.Peer, Model: s.cfg.Model, BlockSize: s.cfg.BlockSize,
		Epoch: s.cfg.Epoch, Seq: s.seq, Held: s.held, Added: added, Removed: removed}
}

// Snapshot returns the current state as a snapshot: the advertised hashes,
// sorted, or in Bloom mode a filter when they are more than MaxBlocks.
func (s *Source) Snapshot() *Digest {
	d := s.header(KindSnapshot, nil, nil)
	if len(s.adv) > s.cfg.MaxBlocks { // only in Bloom mode
		d.Filter = NewBloom(s.cfg.MaxBlocks, len(s.adv))
		for h := range s.adv {
			d.Filter.Add(h)
		}
		return d
	}
	d.Hashes = make([]Hash, 0, len(s.adv))
	for h := range s.adv {
		d.Hashes = append(d.Hashes, h)
	}
	slices.Sort(d.Hashes)
	return d
}

// Contains reports whether the current state advertises h exactly (tests
// and measurements compare replicas with it).
func (s *Source) Contains(h Hash) bool {
	_, ok := s.adv[h]
	return ok
}
