package simnet

import (
	"time"

	"github.com/meshllm/meshllm/node"
)

// rttSource is a peer's node.RTTSource: the links' true round trip, known
// from the start (the p2p layer pings peers as soon as it connects).
type rttSource struct {
	c    *Cluster
	self int
}

func (r rttSource) RTT(p node.PeerID) (time.Duration, bool) {
	i, ok := r.c.index[p]
	if !ok {
		return 0, false
	}
	return r.c.cfg.Net.OneWay(r.self, i) + r.c.cfg.Net.OneWay(i, r.self), true
}
