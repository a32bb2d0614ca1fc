package cache

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// ClusterView holds a Replica of every peer's digest for one model and block
// size, plus an index from chain hash to the peers holding it, so that one
// walk of a prompt's chain estimates the match on every peer at once.
//
// The index maps each hash to a row of a bit matrix (one bit per peer, rows
// of ceil(peers/64) words); a hash several peers hold is stored once. Peers
// whose snapshot was a Bloom filter are checked against their filter during
// the same walk.
//
// Memory per advertised block: one index entry per distinct hash (about 30
// bytes with its row at up to 64 peers) plus the replica's own set (about 20
// bytes per peer and hash); docs/digests.md has the measured figure. A row
// has a bit per peer, so without a bound on peers the index would grow with
// peers x hashes x peers (392 bytes per peer and hash at 2,000 peers): the
// view's ViewLimits bound both factors (peers, and blocks per replica; see
// Replica), so its memory is at most about MaxPeers x MaxBlocks x (76 +
// MaxPeers/8) bytes: 183 MiB at the defaults, all hashes distinct.
//
// Not safe for concurrent use: the router's loop owns it.
type ClusterView struct {
	hasher Hasher
	model  string
	limits ViewLimits

	peers  []*viewPeer // by bit; nil where free
	byID   map[string]int
	stride int // words per row

	index map[Hash]uint32 // hash -> row
	rows  []uint64        // row r is rows[r*stride : (r+1)*stride]
	free  []uint32        // free rows

	chain   []Hash   // scratch for Score
	alive   []uint64 // scratch for Score
	matched []int    // scratch for Score: blocks matched, by bit
}

type viewPeer struct {
	r   *Replica
	bit int
}

// Estimate is what the view knows of one peer for one prompt.
type Estimate struct {
	Peer          string
	Tokens        int           // leading prompt tokens the peer probably holds (whole blocks)
	Age           time.Duration // how old that knowledge is
	NeedsSnapshot bool          // the replica missed a change: Tokens may be off
}

// Scores is the estimated match of one prompt on the local engine and on
// every peer.
type Scores struct {
	Local int        // exact, from the local Tree
	Peers []Estimate // every peer in the view, in no particular order
}

// DefaultViewPeers is the default of ViewLimits.MaxPeers: above the p2p
// layer's connection high-water mark (96), so a view whose authors must be
// connected peers is full only while the connection manager lets more in.
const DefaultViewPeers = 128

// ViewLimits bounds a ClusterView; a zero field selects its default.
type ViewLimits struct {
	// MaxPeers bounds the peers with a replica (default DefaultViewPeers).
	MaxPeers int
	// MaxBlocks is each replica's block limit (default
	// DefaultReplicaBlocks; see Replica).
	MaxBlocks int
}

func (l ViewLimits) withDefaults() ViewLimits {
	if l.MaxPeers <= 0 {
		l.MaxPeers = DefaultViewPeers
	}
	if l.MaxBlocks <= 0 {
		l.MaxBlocks = DefaultReplicaBlocks
	}
	return l
}

// ErrViewFull is wrapped by ClusterView.Apply for a digest of a new peer
// when the view already holds MaxPeers: the caller decides whom to Remove
// (node.Mesh evicts by its documented order) and applies it again.
var ErrViewFull = errors.New("cache: cluster view is full")

// NewClusterView returns an empty view for model at blockSize, with the
// default limits.
func NewClusterView(model string, blockSize int) *ClusterView {
	return NewClusterViewLimits(model, blockSize, ViewLimits{})
}

// NewClusterViewLimits returns an empty view for model at blockSize bounded
// by limits.
func NewClusterViewLimits(model string, blockSize int, limits ViewLimits) *ClusterView {
	return NewClusterViewHasher(NewHasher(model, blockSize), model, limits)
}

// NewClusterViewHasher returns an empty view for model bounded by limits
// that hashes prompts with h (its block size is the view's): a keyed
// Hasher (NewKeyedHasher) for the digests of a private mesh, whose
// Sources use the same key.
func NewClusterViewHasher(h Hasher, model string, limits ViewLimits) *ClusterView {
	return &ClusterView{
		hasher: h,
		model:  model,
		limits: limits.withDefaults(),
		byID:   map[string]int{},
		stride: 1,
		index:  map[Hash]uint32{},
	}
}

// Limits returns the view's limits, defaults filled in.
func (v *ClusterView) Limits() ViewLimits { return v.limits }

// Hasher returns the view's hasher.
func (v *ClusterView) Hasher() Hasher { return v.hasher }

// Len returns the number of peers in the view.
func (v *ClusterView) Len() int { return len(v.byID) }

// Blocks returns the number of distinct hashes in the index.
func (v *ClusterView) Blocks() int { return len(v.index) }

// Replica returns peer's replica, or nil. The caller may read it but must
// feed it through the view's Apply.
func (v *ClusterView) Replica(peer string) *Replica {
	if i, ok := v.byID[peer]; ok {
		return v.peers[i].r
	}
	return nil
}

// Apply feeds a digest to its author's replica, adding the peer to the view
// on first contact; a new peer when the view holds MaxPeers fails with
// ErrViewFull and changes nothing. See Replica.Apply.
func (v *ClusterView) Apply(d *Digest, now int64) (Outcome, error) {
	if d.Model != v.model || d.BlockSize != v.hasher.BlockSize() {
		return 0, fmt.Errorf("%w: model %q block size %d, view has %q %d", ErrMismatch,
			d.Model, d.BlockSize, v.model, v.hasher.BlockSize())
	}
	if err := d.Validate(); err != nil {
		return 0, err
	}
	if _, ok := v.byID[d.Peer]; !ok && len(v.byID) >= v.limits.MaxPeers {
		return 0, fmt.Errorf("%w: %d peers, digest of a new one (%s)", ErrViewFull, len(v.byID), d.Peer)
	}
	return v.peer(d.Peer).r.Apply(d, now)
}

// peer returns peer's entry, creating it.
func (v *ClusterView) peer(id string) *viewPeer {
	if i, ok := v.byID[id]; ok {
		return v.peers[i]
	}
	bit := slices.Index(v.peers, nil)
	if bit < 0 {
		bit = len(v.peers)
		v.peers = append(v.peers, nil)
		if bit >= v.stride*64 {
			v.grow()
		}
	}
	p := &viewPeer{r: NewReplicaLimit(id, v.model, v.hasher.BlockSize(), v.limits.MaxBlocks), bit: bit}
	word, mask := bit/64, uint64(1)<<(bit%64)
	p.r.onAdd = func(h Hash) {
		row, ok := v.index[h]
		if !ok {
			row = v.newRow()
			v.index[h] = row
		}
		v.rows[int(row)*v.stride+word] |= mask
	}
	p.r.onRemove = func(h Hash) {
		row, ok := v.index[h]
		if !ok {
			return
		}
		r := v.rows[int(row)*v.stride : int(row+1)*v.stride]
		r[word] &^= mask
		for _, w := range r {
			if w != 0 {
				return
			}
		}
		delete(v.index, h)
		v.free = append(v.free, row)
	}
	v.peers[bit] = p
	v.byID[id] = bit
	return p
}

func (v *ClusterView) newRow() uint32 {
	if n := len(v.free); n > 0 {
		row := v.free[n-1]
		v.free = v.free[:n-1]
		return row
	}
	row := uint32(len(v.rows) / v.stride)
	v.rows = append(v.rows, make([]uint64, v.stride)...)
	return row
}

// grow adds a word to every row.
func (v *ClusterView) grow() {
	old := v.stride
	v.stride++
	rows := make([]uint64, len(v.rows)/old*v.stride)
	for r := 0; r < len(v.rows)/old; r++ {
		copy(rows[r*v.stride:], v.rows[r*old:(r+1)*old])
	}
	v.rows = rows
}

// Remove drops peer from the view.
func (v *ClusterView) Remove(peer string) {
	i, ok := v.byID[peer]
	if !ok {
		return
	}
	v.peers[i].r.Forget()
	v.peers[i] = nil
	delete(v.byID, peer)
}

// Expire removes the peers not heard from for longer than ttl and returns
// their IDs.
func (v *ClusterView) Expire(now int64, ttl time.Duration) []string {
	var gone []string
	for id, i := range v.byID {
		if v.peers[i].r.Expired(now, ttl) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		v.Remove(id)
	}
	return gone
}

// NeedSnapshots returns the peers whose replicas need a snapshot, sorted.
func (v *ClusterView) NeedSnapshots() []string {
	var out []string
	for id, i := range v.byID {
		if v.peers[i].r.NeedsSnapshot() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Score estimates the match of prompt on every peer with one walk of its
// chain, and the exact match on local (which may be nil). It reuses out's
// slices. The cost is hashing prompt (about 1 ns a token) plus one index
// lookup per block until no peer matches any more.
func (v *ClusterView) Score(prompt []int32, local *Tree, now int64, out *Scores) {
	out.Local = 0
	if local != nil {
		out.Local = local.MatchLen(prompt)
	}
	v.chain = v.hasher.Chain(v.chain[:0], prompt)
	v.ScoreChain(v.chain, now, out)
}

// ScoreChain is Score for a chain already hashed with Hasher; it leaves
// out.Local alone.
func (v *ClusterView) ScoreChain(chain []Hash, now int64, out *Scores) {
	out.Peers = out.Peers[:0]
	if len(v.byID) == 0 {
		return
	}
	// blocks[bit] ends as the matched length of each peer.
	v.alive = slices.Grow(v.alive[:0], v.stride)[:v.stride]
	clear(v.alive)
	var bloom []*viewPeer
	for _, p := range v.peers {
		if p != nil {
			v.alive[p.bit/64] |= 1 << (p.bit % 64)
			if p.r.filter != nil {
				bloom = append(bloom, p)
			}
		}
	}
	v.matched = slices.Grow(v.matched[:0], len(v.peers))[:len(v.peers)]
	matched := v.matched
	for i := range matched {
		matched[i] = len(chain)
	}
	any := true
	for i := 0; i < len(chain) && any; i++ {
		h := chain[i]
		row, ok := v.index[h]
		any = false
		for w := range v.alive {
			var b uint64
			if ok {
				b = v.rows[int(row)*v.stride+w]
			}
			for _, p := range bloom {
				if p.bit/64 == w && b&(1<<(p.bit%64)) == 0 && v.alive[w]&(1<<(p.bit%64)) != 0 && p.r.Has(h) {
					b |= 1 << (p.bit % 64)
				}
			}
			for dropped := v.alive[w] &^ b; dropped != 0; dropped &= dropped - 1 {
				matched[w*64+bits.TrailingZeros64(dropped)] = i
			}
			v.alive[w] &= b
			any = any || v.alive[w] != 0
		}
	}
	bs := v.hasher.BlockSize()
	for _, p := range v.peers {
		if p == nil {
			continue
		}
		out.Peers = append(out.Peers, Estimate{
			Peer:          p.r.peer,
			Tokens:        matched[p.bit] * bs,
			Age:           p.r.Age(now),
			NeedsSnapshot: p.r.NeedsSnapshot(),
		})
	}
}
