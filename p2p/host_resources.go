package p2p

import (
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
)

// resourceManager builds the libp2p resource manager from cfg.Resources:
// libp2p's default scaling limits (with its per-service limits for
// identify, ping, relay, AutoNAT, hole punching) scaled to MaxMemory and
// MaxFD, then the explicit caps. Loopback connections are never limited
// per subnet (libp2p's default), so a testnet of many peers on one
// machine works with the same limits.
func resourceManager(cfg *Config) (network.ResourceManager, error) {
	var opts []rcmgr.Option
	if cfg.Metrics == nil {
		opts = append(opts, rcmgr.WithMetricsDisabled())
	} else {
		rcmgr.MustRegisterWith(cfg.Metrics)
	}
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(resourceLimits(&cfg.Resources)), opts...)
}

// resourceLimits computes the concrete limits: libp2p's scaling rule at
// MaxMemory, the system memory capped at exactly MaxMemory (the rule alone
// would give 128 MiB more), then the explicit caps.
func resourceLimits(r *ResourceLimits) rcmgr.ConcreteLimitConfig {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	fd := r.MaxFD
	if fd <= 0 {
		fd = systemFDs() / 2
	}
	// Scale gives the system scope FDFraction (1) of fd descriptors, at
	// least libp2p's base of 256.
	concrete := limits.Scale(r.MaxMemory, fd)
	partial := rcmgr.PartialLimitConfig{}
	partial.System.Memory = rcmgr.LimitVal64(r.MaxMemory)
	if v := r.MaxConns; v > 0 {
		partial.System.Conns = rcmgr.LimitVal(v)
	}
	if v := r.MaxConnsInbound; v > 0 {
		partial.System.ConnsInbound = rcmgr.LimitVal(v)
	}
	if v := r.MaxStreams; v > 0 {
		partial.System.Streams = rcmgr.LimitVal(v)
	}
	perPeer := r.MaxStreamsInboundPerPeer
	if perPeer <= 0 {
		perPeer = 64
	}
	partial.PeerDefault.StreamsInbound = rcmgr.LimitVal(perPeer)
	partial.PeerDefault.Streams = rcmgr.LimitVal(2 * perPeer)
	applyProtocolLimits(&partial, r.Protocols)
	return partial.Build(concrete)
}

// connManager builds the connection manager from the water marks.
func connManager(cfg *Config) (*connmgr.BasicConnMgr, error) {
	return connmgr.NewConnManager(cfg.ConnLowWater, cfg.ConnHighWater, connmgr.WithGracePeriod(cfg.ConnGracePeriod))
}
