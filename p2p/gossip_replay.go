package p2p

import (
	"encoding/binary"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/meshllm/meshllm/cache"
)

// replayWindow is how far below the newest pubsub sequence number of an
// author a message may arrive (out of order through another mesh path) and
// still be accepted once.
const replayWindow = 64

// freshness remembers, per author, what the topic validator last accepted,
// to ignore replays and stale messages. It is not safe for concurrent use:
// the Topic guards it with a mutex. It holds at most max authors, dropping
// the least recently heard from.
type freshness struct {
	max     int
	tick    uint64
	authors map[peer.ID]*authorState
}

type authorState struct {
	used uint64 // tick of the last accepted message

	// pubsub sequence numbers: newest, and a bitmap of the replayWindow
	// numbers below it (bit i: top-1-i seen).
	haveSeq bool
	seqTop  uint64
	seqBits uint64

	haveDigest bool
	epoch      uint64 // digest epoch
	snapTop    uint64 // newest snapshot Seq in epoch
	deltaTop   uint64 // newest delta Seq in epoch

	haveLoad  bool
	loadEpoch uint64
	loadSeq   uint64
}

func newFreshness(max int) *freshness {
	return &freshness{max: max, authors: map[peer.ID]*authorState{}}
}

func (f *freshness) state(a peer.ID) *authorState {
	f.tick++
	if s, ok := f.authors[a]; ok {
		return s
	}
	if len(f.authors) >= f.max {
		var victim peer.ID
		oldest := ^uint64(0)
		for id, s := range f.authors {
			if s.used < oldest {
				victim, oldest = id, s.used
			}
		}
		delete(f.authors, victim)
	}
	s := &authorState{}
	f.authors[a] = s
	return s
}

// seqno checks a pubsub sequence number (8 bytes big-endian; absent ones
// are not checked) without recording it: true when it is new.
func (s *authorState) seqnoFresh(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, true
	}
	n := binary.BigEndian.Uint64(b)
	switch {
	case !s.haveSeq || n > s.seqTop:
		return n, true
	case n == s.seqTop:
		return n, false
	case s.seqTop-n > replayWindow:
		return n, false
	}
	return n, s.seqBits&(1<<(s.seqTop-n-1)) == 0
}

func (s *authorState) recordSeqno(b []byte, n uint64) {
	if len(b) != 8 {
		return
	}
	switch {
	case !s.haveSeq:
		s.haveSeq, s.seqTop = true, n
	case n > s.seqTop:
		shift := n - s.seqTop
		if shift > replayWindow {
			s.seqBits = 0
		} else {
			s.seqBits = s.seqBits<<shift | 1<<(shift-1)
		}
		s.seqTop = n
	default:
		s.seqBits |= 1 << (s.seqTop - n - 1)
	}
}

// digest decides on a digest from author a with pubsub seqno b, and
// records it when fresh. Stale: an older epoch; in the same epoch, a
// snapshot older than the newest snapshot (an equal one confirms the state
// and is fresh), or a delta that a newer snapshot covers or that is more
// than cache.MaxPending behind the newest delta.
func (f *freshness) digest(a peer.ID, b []byte, d *cache.Digest) bool {
	s := f.state(a)
	n, ok := s.seqnoFresh(b)
	if !ok {
		return false
	}
	if s.haveDigest {
		switch {
		case d.Epoch < s.epoch:
			return false
		case d.Epoch > s.epoch:
			s.snapTop, s.deltaTop = 0, 0
		case d.Kind == cache.KindSnapshot && d.Seq < s.snapTop:
			return false
		case d.Kind == cache.KindDelta && (d.Seq <= s.snapTop || d.Seq+cache.MaxPending < s.deltaTop):
			return false
		}
	}
	s.haveDigest, s.epoch = true, d.Epoch
	if d.Kind == cache.KindSnapshot {
		s.snapTop = max(s.snapTop, d.Seq)
	} else {
		s.deltaTop = max(s.deltaTop, d.Seq)
	}
	s.recordSeqno(b, n)
	s.used = f.tick
	return true
}

// load decides on a load announcement; fresh only when (Epoch, Seq) is
// newer than the last accepted one.
func (f *freshness) load(a peer.ID, b []byte, l *Load) bool {
	s := f.state(a)
	n, ok := s.seqnoFresh(b)
	if !ok {
		return false
	}
	if s.haveLoad && (l.Epoch < s.loadEpoch || l.Epoch == s.loadEpoch && l.Seq <= s.loadSeq) {
		return false
	}
	s.haveLoad, s.loadEpoch, s.loadSeq = true, l.Epoch, l.Seq
	s.recordSeqno(b, n)
	s.used = f.tick
	return true
}
