package main

import (
	"github.com/meshllm/meshllm/p2p"
	"github.com/prometheus/client_golang/prometheus"
)

// registerGossipMetrics exports the gossip layer's counters on reg: bytes
// and messages in and out, and what the topic validators refused.
func registerGossipMetrics(reg prometheus.Registerer, g *p2p.Gossip) error {
	counter := func(name, help string, read func(p2p.GossipStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "meshllm", Subsystem: "gossip", Name: name, Help: help,
		}, func() float64 { return float64(read(g.Stats())) })
	}
	for _, c := range []prometheus.Collector{
		counter("bytes_in_total", "Payload bytes of cache digests and load announcements received from other peers.",
			func(s p2p.GossipStats) int64 { return s.BytesIn }),
		counter("bytes_out_total", "Payload bytes this peer published (relays send them again).",
			func(s p2p.GossipStats) int64 { return s.BytesOut }),
		counter("messages_in_total", "Messages received from other peers and accepted.",
			func(s p2p.GossipStats) int64 { return s.MessagesIn }),
		counter("messages_out_total", "Messages this peer published.",
			func(s p2p.GossipStats) int64 { return s.MessagesOut }),
		counter("rejected_total", "Messages the topic validator rejected: malformed, oversize or forged.",
			func(s p2p.GossipStats) int64 { return s.Rejected }),
		counter("ignored_total", "Messages the topic validator ignored: stale or replayed.",
			func(s p2p.GossipStats) int64 { return s.Ignored }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
