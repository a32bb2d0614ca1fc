package p2p

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

// mdnsNotifee connects to the peers mDNS finds on the local network.
type mdnsNotifee struct{ h *Host }

// HandlePeerFound is called by the mDNS service's goroutine; the dial runs
// in the background so it never blocks the resolver.
func (n mdnsNotifee) HandlePeerFound(pi peer.AddrInfo) {
	h := n.h
	if pi.ID == h.h.ID() {
		return
	}
	h.goRun(func(ctx context.Context) {
		if err := h.connect(ctx, pi); err != nil {
			h.log.Debug("mDNS peer unreachable", "peer", pi.ID, "err", err)
			return
		}
		h.log.Info("connected to LAN peer", "peer", pi.ID)
	})
}

// startMDNS announces the peer and listens for others under
// MDNSServiceName.
func (h *Host) startMDNS() error {
	s := mdns.NewMdnsService(h.h, h.cfg.MDNSServiceName, mdnsNotifee{h})
	if err := s.Start(); err != nil {
		return err
	}
	h.closeMDNS = s.Close
	return nil
}
