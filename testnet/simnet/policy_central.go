package simnet

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"github.com/meshllm/meshllm/cache"
)

// consistentHash routes on a hash of the prompt's head with bounded loads
// (Mirrokni, Thorup and Zadimoghaddam's consistent hashing with bounded
// loads).
type consistentHash struct {
	ring   []uint64
	owner  map[uint64]int
	hasher cache.Hasher
	chain  []cache.Hash
}

const (
	chVirtualNodes = 64
	chKeyTokens    = 256
	chLoadFactor   = 1.25
)

func (*consistentHash) Name() string      { return "consistent-hash" }
func (*consistentHash) Centralised() bool { return true }
func (*consistentHash) kind() kind        { return central }

func (p *consistentHash) reset(c *Cluster) {
	p.ring, p.owner = nil, map[uint64]int{}
	p.hasher = cache.NewHasher(c.model, blockSize(c))
	for i := range c.peers {
		for v := range chVirtualNodes {
			h := fnv.New64a()
			h.Write([]byte(c.peers[i].id))
			h.Write(binary.LittleEndian.AppendUint32(nil, uint32(v)))
			k := h.Sum64()
			if _, dup := p.owner[k]; dup {
				continue
			}
			p.owner[k] = i
			p.ring = append(p.ring, k)
		}
	}
	slices.Sort(p.ring)
}

func (p *consistentHash) route(c *Cluster, entry int, prompt []int32, _ int) []int {
	b := p.hasher.BlockSize()
	n := min(len(prompt), chKeyTokens) / b * b
	var key uint64
	if n == 0 {
		key = uint64(p.hasher.Next(p.hasher.Seed(), prompt))
	} else {
		p.chain = p.hasher.Chain(p.chain[:0], prompt[:n])
		key = uint64(p.chain[len(p.chain)-1])
	}
	total, live := 1, 0
	for i, pr := range c.peers {
		if pr.up {
			total += c.outstanding[i]
			live++
		}
	}
	limit := int(chLoadFactor*float64(total)/float64(max(live, 1))) + 1
	start, _ := slices.BinarySearch(p.ring, key)
	for k := range len(p.ring) {
		i := p.owner[p.ring[(start+k)%len(p.ring)]]
		if c.peers[i].up && c.outstanding[i] < limit {
			return []int{i}
		}
	}
	return nil
}

func blockSize(c *Cluster) int {
	if c.cfg.BlockSize > 0 {
		return c.cfg.BlockSize
	}
	return cache.DefaultBlockSize
}

// sglang is SGLang's cache-aware load balancer (sgl-router's
// cache_aware policy) with its default thresholds. Its per-worker trees
// are approximate: they hold what the router sent each worker, not what
// the worker's cache still holds; each is bounded by the worker's KV
// capacity, least recently routed blocks evicted first.
type sglang struct {
	hasher cache.Hasher
	trees  []map[cache.Hash]int64
	limit  []int
	tick   int64
	chain  []cache.Hash
}

const (
	sglCacheThreshold = 0.3
	sglBalanceAbs     = 64
	sglBalanceRel     = 1.5
)

func (*sglang) Name() string      { return "sglang" }
func (*sglang) Centralised() bool { return true }
func (*sglang) kind() kind        { return central }

func (p *sglang) reset(c *Cluster) {
	p.hasher = cache.NewHasher(c.model, blockSize(c))
	p.trees = make([]map[cache.Hash]int64, len(c.peers))
	p.limit = make([]int, len(c.peers))
	for i := range p.trees {
		p.trees[i] = map[cache.Hash]int64{}
		p.limit[i] = max(1, c.peers[i].prof.CacheCells/p.hasher.BlockSize())
	}
	p.tick = 0
}

func (p *sglang) route(c *Cluster, entry int, prompt []int32, _ int) []int {
	p.chain = p.hasher.Chain(p.chain[:0], prompt)
	minL, maxL, minI := -1, -1, -1
	for i, pr := range c.peers {
		if !pr.up {
			continue
		}
		l := c.outstanding[i]
		if minL < 0 || l < minL {
			minL, minI = l, i
		}
		maxL = max(maxL, l)
	}
	if minI < 0 {
		return nil
	}
	target := minI
	if !(maxL-minL > sglBalanceAbs && float64(maxL) > sglBalanceRel*float64(minL)) {
		best, bestN, smallest := -1, -1, -1
		for i, pr := range c.peers {
			if !pr.up {
				continue
			}
			n := 0
			for n < len(p.chain) {
				if _, ok := p.trees[i][p.chain[n]]; !ok {
					break
				}
				n++
			}
			if n > bestN || (n == bestN && c.outstanding[i] < c.outstanding[best]) {
				best, bestN = i, n
			}
			if smallest < 0 || len(p.trees[i]) < len(p.trees[smallest]) {
				smallest = i
			}
		}
		target = smallest
		if float64(bestN*p.hasher.BlockSize())/float64(max(len(prompt), 1)) > sglCacheThreshold {
			target = best
		}
	}
	p.insert(target)
	return []int{target}
}

// insert records the prompt's chain in peer i's tree, evicting the least
// recently routed blocks beyond its capacity (in batches, as SGLang's
// periodic eviction does).
func (p *sglang) insert(i int) {
	p.tick++
	t := p.trees[i]
	for _, h := range p.chain {
		t[h] = p.tick
	}
	if len(t) <= p.limit[i]+p.limit[i]/8 {
		return
	}
	type hu struct {
		h cache.Hash
		u int64
	}
	all := make([]hu, 0, len(t))
	for h, u := range t {
		all = append(all, hu{h, u})
	}
	slices.SortFunc(all, func(a, b hu) int {
		if a.u != b.u {
			return int(a.u - b.u)
		}
		return int(a.h>>1) - int(b.h>>1)
	})
	for _, x := range all[:len(all)-p.limit[i]] {
		delete(t, x.h)
	}
}
