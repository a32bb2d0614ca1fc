package cache

import (
	"fmt"
	"slices"
	"time"
)

// Outcome says what Apply did with a digest.
type Outcome uint8

const (
	// Applied: the digest moved the replica to a newer state.
	Applied Outcome = iota + 1
	// Duplicate: the replica already has this state or a newer one of the
	// same epoch; nothing changed.
	Duplicate
	// Stale: the digest belongs to an older epoch, or is a snapshot older
	// than the replica's state; nothing changed.
	Stale
	// Gap: a delta arrived before one it depends on. The replica keeps it
	// (up to MaxPending of them, and its block limit in hashes) in case the
	// missing ones arrive reordered, and NeedsSnapshot reports true until
	// the gap closes (or, for a delta it could not keep, until a snapshot
	// passes it).
	Gap
	// NewEpoch: a delta of a newer epoch than the replica's, which cannot
	// apply to anything the replica has: NeedsSnapshot reports true.
	NewEpoch
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case Gap:
		return "gap"
	case NewEpoch:
		return "new-epoch"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// MaxPending bounds the out-of-order deltas a replica keeps while it waits
// for the missing ones.
const MaxPending = 64

// DefaultReplicaBlocks is the default of a replica's block limit (see
// NewReplicaLimit): the default digest cap, so a peer with default
// settings is never truncated.
const DefaultReplicaBlocks = DefaultMaxBlocks

// Replica is a read-only, approximate copy of one peer's digest, fed with
// the peer's snapshots and deltas in any order. It answers how many leading
// blocks of a chain the peer probably holds, and how old that knowledge is.
//
// The replica never applies a delta out of order: a gap, or a delta of a
// newer epoch, makes NeedsSnapshot true (the caller then pulls a snapshot
// from the peer, the anti-entropy repair) while it keeps answering from the
// state it has. Its age tells the caller how far to trust it.
//
// A replica holds at most a limit of blocks (NewReplicaLimit), whatever the
// peer sends: at most that many exactly known hashes, that many removals
// tracked over a Bloom filter, a filter of at most that many 64-bit words,
// and pending deltas of at most that many hashes in all. Beyond it, the
// extra hashes of a snapshot or delta are dropped, a filter that is too
// large (or whose removals overflow) is dropped, and a pending delta that
// does not fit is not kept (the gap then waits for a snapshot). Each of
// these only loses matches: a truncated replica may underestimate a peer,
// never overestimate it. Truncated reports it.
//
// Not safe for concurrent use. Times are the caller's clock in nanoseconds.
type Replica struct {
	peer, model string
	blockSize   int
	max         int // block limit

	synced     bool
	epoch, seq uint64
	held       int
	set        map[Hash]struct{}
	filter     *Bloom            // a Bloom-mode snapshot's filter
	removed    map[Hash]struct{} // removals since the filter, which it cannot forget
	pending    map[uint64]*Digest
	pendingN   int    // hashes in pending
	lostTop    uint64 // highest Seq of a delta not kept as pending (0: none)
	need       bool
	truncated  bool  // the state dropped hashes or a filter to stay within max
	heard      int64 // when a message last confirmed the state

	// Hooks that keep a ClusterView's index in step with set.
	onAdd, onRemove func(Hash)
}

// NewReplica returns an empty replica of peer's cache of model at the given
// block size, which needs a snapshot (or the first delta of an epoch). Its
// block limit is DefaultReplicaBlocks.
func NewReplica(peer, model string, blockSize int) *Replica {
	return NewReplicaLimit(peer, model, blockSize, 0)
}

// NewReplicaLimit is NewReplica with a block limit of maxBlocks (0 or less:
// DefaultReplicaBlocks); see Replica.
func NewReplicaLimit(peer, model string, blockSize, maxBlocks int) *Replica {
	if maxBlocks <= 0 {
		maxBlocks = DefaultReplicaBlocks
	}
	return &Replica{peer: peer, model: model, blockSize: blockSize, max: maxBlocks, set: map[Hash]struct{}{}}
}

// MaxBlocks returns the replica's block limit.
func (r *Replica) MaxBlocks() int { return r.max }

// Truncated reports whether the replica's state dropped hashes, or a Bloom
// filter, to stay within its block limit: its estimates may fall short.
func (r *Replica) Truncated() bool { return r.truncated }

// Peer returns the peer ID the replica follows.
func (r *Replica) Peer() string { return r.peer }

// State returns the epoch and sequence number of the replica's state, and
// whether it has one at all.
func (r *Replica) State() (epoch, seq uint64, ok bool) { return r.epoch, r.seq, r.synced }

// NeedsSnapshot reports whether the replica has no state, or missed a delta
// that no reordered arrival has supplied yet.
func (r *Replica) NeedsSnapshot() bool { return !r.synced || r.need }

// Held returns how many blocks the peer said its cache holds.
func (r *Replica) Held() int { return r.held }

// Len returns how many hashes the replica knows exactly (Bloom-mode
// contents excluded).
func (r *Replica) Len() int { return len(r.set) }

// Bloom reports whether the replica answers partly from a Bloom filter.
func (r *Replica) Bloom() bool { return r.filter != nil }

// Hashes returns the exactly known hashes, sorted.
func (r *Replica) Hashes() []Hash {
	out := make([]Hash, 0, len(r.set))
	for h := range r.set {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Age returns how long ago a message last confirmed the replica's state;
// 0 before any message.
func (r *Replica) Age(now int64) time.Duration {
	if r.heard == 0 {
		return 0
	}
	return time.Duration(now - r.heard)
}

// Expired reports whether the peer has been silent for longer than ttl (or
// was never heard from).
func (r *Replica) Expired(now int64, ttl time.Duration) bool {
	return r.heard == 0 || time.Duration(now-r.heard) > ttl
}

// Has reports whether the peer probably holds the block with chain hash h.
func (r *Replica) Has(h Hash) bool {
	if _, ok := r.set[h]; ok {
		return true
	}
	if r.filter == nil {
		return false
	}
	_, gone := r.removed[h]
	return !gone && r.filter.Has(h)
}

// Match returns how many leading hashes of chain the peer probably holds.
func (r *Replica) Match(chain []Hash) int {
	for i, h := range chain {
		if !r.Has(h) {
			return i
		}
	}
	return len(chain)
}

// Estimate returns how many leading tokens of the sequence whose chain is
// chain the peer probably holds, and the age of that knowledge.
func (r *Replica) Estimate(chain []Hash, now int64) (tokens int, age time.Duration) {
	return r.Match(chain) * r.blockSize, r.Age(now)
}

// Apply feeds one digest of the peer to the replica. It returns an error
// wrapping ErrMismatch for another peer's, model's or block size's digest
// and the Validate error for an invalid one; the replica is unchanged then.
// A digest kept as pending (Gap) is retained: the caller must not modify it.
func (r *Replica) Apply(d *Digest, now int64) (Outcome, error) {
	if d.Peer != r.peer || d.Model != r.model || d.BlockSize != r.blockSize {
		return 0, fmt.Errorf("%w: %q/%q/%d for replica %q/%q/%d", ErrMismatch,
			d.Peer, d.Model, d.BlockSize, r.peer, r.model, r.blockSize)
	}
	if err := d.Validate(); err != nil {
		return 0, err
	}
	if r.synced && d.Epoch < r.epoch {
		return Stale, nil
	}
	newer := !r.synced || d.Epoch > r.epoch
	if d.Kind == KindSnapshot {
		switch {
		case !newer && d.Seq < r.seq:
			return Stale, nil
		case !newer && d.Seq == r.seq:
			r.heard = now
			return Duplicate, nil
		}
		if newer {
			r.dropPending()
		}
		r.load(d)
		r.epoch, r.seq, r.synced = d.Epoch, d.Seq, true
		r.heard = now
		r.drain()
		return Applied, nil
	}
	if newer {
		if d.Seq != 1 {
			r.need = true
			return NewEpoch, nil
		}
		// The first delta of an epoch applies to the empty cache.
		r.reset()
		r.dropPending()
		r.epoch, r.seq, r.synced = d.Epoch, 0, true
	}
	switch {
	case d.Seq <= r.seq:
		if d.Seq == r.seq {
			r.heard = now
		}
		return Duplicate, nil
	case d.Seq > r.seq+1:
		r.keepPending(d)
		r.need = true
		return Gap, nil
	}
	r.applyDelta(d)
	r.heard = now
	r.drain()
	return Applied, nil
}

// keepPending keeps d until the deltas before it arrive, if it fits: at
// most MaxPending deltas and the block limit in hashes altogether.
func (r *Replica) keepPending(d *Digest) {
	n := len(d.Added) + len(d.Removed)
	old, dup := r.pending[d.Seq]
	if dup {
		n -= len(old.Added) + len(old.Removed)
	}
	if !dup && len(r.pending) >= MaxPending || r.pendingN+n > r.max {
		r.lostTop = max(r.lostTop, d.Seq) // the gap stays open until a snapshot passes it
		return
	}
	if r.pending == nil {
		r.pending = map[uint64]*Digest{}
	}
	r.pending[d.Seq] = d
	r.pendingN += n
}

// dropPending forgets every pending delta.
func (r *Replica) dropPending() { r.pending, r.pendingN, r.lostTop = nil, 0, 0 }

// drain applies pending deltas that now follow the state and drops those
// it has passed.
func (r *Replica) drain() {
	for {
		d, ok := r.pending[r.seq+1]
		if !ok {
			break
		}
		r.applyDelta(d)
	}
	for s, d := range r.pending {
		if s <= r.seq {
			delete(r.pending, s)
			r.pendingN -= len(d.Added) + len(d.Removed)
		}
	}
	r.need = len(r.pending) > 0 || r.lostTop > r.seq
}

func (r *Replica) applyDelta(d *Digest) {
	for _, h := range d.Removed {
		if _, ok := r.set[h]; ok {
			delete(r.set, h)
			if r.onRemove != nil {
				r.onRemove(h)
			}
		}
		if r.filter != nil {
			if len(r.removed) >= r.max {
				// The filter cannot forget more: drop it (and
				// with it every match it would have answered).
				r.filter, r.removed, r.truncated = nil, nil, true
				continue
			}
			r.removed[h] = struct{}{}
		}
	}
	for _, h := range d.Added {
		if _, ok := r.set[h]; !ok {
			if len(r.set) >= r.max {
				r.truncated = true
				continue
			}
			r.set[h] = struct{}{}
			if r.onAdd != nil {
				r.onAdd(h)
			}
		}
		if r.filter != nil {
			delete(r.removed, h)
		}
	}
	r.held = d.Held
	r.seq = d.Seq
}

// load replaces the state with a snapshot's, within the block limit.
func (r *Replica) load(d *Digest) {
	hashes, filter := d.Hashes, d.Filter
	r.truncated = false
	if len(hashes) > r.max {
		hashes, r.truncated = hashes[:r.max], true
	}
	if filter != nil && len(filter.bits) > r.max {
		filter, r.truncated = nil, true
	}
	next := make(map[Hash]struct{}, len(hashes))
	for _, h := range hashes {
		next[h] = struct{}{}
	}
	for h := range r.set {
		if _, ok := next[h]; !ok && r.onRemove != nil {
			r.onRemove(h)
		}
	}
	for h := range next {
		if _, ok := r.set[h]; !ok && r.onAdd != nil {
			r.onAdd(h)
		}
	}
	r.set = next
	r.filter, r.removed = filter, nil
	if filter != nil {
		r.removed = map[Hash]struct{}{}
	}
	r.held = d.Held
}

// reset empties the replica's contents.
func (r *Replica) reset() {
	if r.onRemove != nil {
		for h := range r.set {
			r.onRemove(h)
		}
	}
	r.set = map[Hash]struct{}{}
	r.filter, r.removed = nil, nil
	r.held, r.truncated = 0, false
}

// Forget empties the replica and drops its state, as for a peer that has
// expired; it needs a snapshot again.
func (r *Replica) Forget() {
	r.reset()
	r.dropPending()
	r.synced, r.need = false, false
	r.epoch, r.seq, r.heard = 0, 0, 0
}
