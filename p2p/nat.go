package p2p

import (
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
)

// natOptions returns the libp2p options for NAT traversal and for the
// bootstrap/relay role:
//
//   - port mapping (UPnP, NAT-PMP) when EnablePortMapping;
//   - AutoNAT v2 when EnableAutoNAT (client, and server for others);
//   - hole punching (DCUtR) when EnableHolePunching;
//   - auto-relay through the bootstrap peers when EnableRelayClient and the
//     peer is not a bootstrap node itself;
//   - for a BootstrapNode: AutoNAT v1 service, circuit-relay v2 service with
//     the configured per-connection limits, and public reachability
//     assumed from the start (a bootstrap peer is reachable by definition;
//     waiting for an AutoNAT verdict would keep the relay off for minutes).
func natOptions(cfg *Config, relays []peer.AddrInfo) []libp2p.Option {
	var opts []libp2p.Option
	if cfg.EnablePortMapping {
		opts = append(opts, libp2p.NATPortMap())
	}
	if cfg.EnableAutoNAT || cfg.BootstrapNode {
		opts = append(opts, libp2p.EnableAutoNATv2())
	}
	if cfg.EnableHolePunching {
		opts = append(opts, libp2p.EnableHolePunching())
	}
	if cfg.EnableRelayClient && !cfg.BootstrapNode && len(relays) > 0 {
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays))
	}
	if cfg.BootstrapNode {
		res := relayv2.DefaultResources()
		res.Limit = &relayv2.RelayLimit{Duration: cfg.RelayLimitDuration, Data: cfg.RelayLimitData}
		opts = append(opts,
			libp2p.EnableNATService(),
			libp2p.EnableRelayService(relayv2.WithResources(res)),
			libp2p.ForceReachabilityPublic(),
		)
	}
	return opts
}
