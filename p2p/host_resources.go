package p2p

import (
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// resourceManager builds the libp2p resource manager from cfg.Resources:
// libp2p's default scaling limits (with its per-service limits for
// identify, ping, relay, AutoNAT, hole punching) scaled to MaxMemory and
// MaxFD, then the explicit caps. Loopback connections are never limited
// per subnet (libp2p's default), so a testnet of many peers on one
// machine works with the same limits.
func resourceManager(cfg *Config) (network.ResourceManager, error) {
	limits := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&limits)
	fd := cfg.Resources.MaxFD
	var concrete rcmgr.ConcreteLimitConfig
	if fd > 0 {
		// Scale takes the number of descriptors the stack may use and
		// gives FDFraction (1 for the system scope) of it.
		concrete = limits.Scale(cfg.Resources.MaxMemory, fd)
	} else {
		concrete = limits.Scale(cfg.Resources.MaxMemory, systemFDs()/2)
	}
	partial := rcmgr.PartialLimitConfig{}
	if v := cfg.Resources.MaxConns; v > 0 {
		partial.System.Conns = rcmgr.LimitVal(v)
	}
	if v := cfg.Resources.MaxConnsInbound; v > 0 {
		partial.System.ConnsInbound = rcmgr.LimitVal(v)
	}
	if v := cfg.Resources.MaxStreams; v > 0 {
		partial.System.Streams = rcmgr.LimitVal(v)
	}
	concrete = partial.Build(concrete)
	var opts []rcmgr.Option
	if cfg.Metrics == nil {
		opts = append(opts, rcmgr.WithMetricsDisabled())
	} else {
		rcmgr.MustRegisterWith(cfg.Metrics)
	}
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(concrete), opts...)
}

// connManager builds the connection manager from the water marks.
func connManager(cfg *Config) (*connmgr.BasicConnMgr, error) {
	return connmgr.NewConnManager(cfg.ConnLowWater, cfg.ConnHighWater, connmgr.WithGracePeriod(cfg.ConnGracePeriod))
}
