package p2p

import (
	"context"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
)

// PeerEvent says that a peer connected or disconnected.
type PeerEvent struct {
	// Peer is the remote peer.
	Peer peer.ID
	// Connected is true when at least one connection to Peer is open.
	Connected bool
	// Limited is true when every open connection is limited (relayed):
	// fine for gossip, costly for inference.
	Limited bool
}

// peerEventBuffer is the event-bus buffer of one subscription: a burst of
// (dis)connections while the consumer is busy.
const peerEventBuffer = 256

func (h *Host) subscribeConnectedness() (event.Subscription, error) {
	return h.h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.BufSize(peerEventBuffer), eventbus.Name("meshllm-p2p"))
}

func toPeerEvent(e any) PeerEvent {
	c := e.(event.EvtPeerConnectednessChanged)
	return PeerEvent{
		Peer:      c.Peer,
		Connected: c.Connectedness == network.Connected || c.Connectedness == network.Limited,
		Limited:   c.Connectedness == network.Limited,
	}
}

// SubscribePeers returns a channel of peer connect and disconnect events
// until ctx ends or the Host closes; then the channel is closed. It starts
// with a Connected event for every peer already connected, so a
// subscriber sees the whole state; events are level-triggered and the
// same state may be reported twice, so consumers should treat them as
// idempotent.
//
// The consumer must keep draining: libp2p's event bus waits for slow
// subscribers (after a buffer of 256 events), which delays connection
// handling for everyone.
func (h *Host) SubscribePeers(ctx context.Context) (<-chan PeerEvent, error) {
	sub, err := h.subscribeConnectedness()
	if err != nil {
		return nil, err
	}
	out := make(chan PeerEvent)
	ok := h.goRun(func(hctx context.Context) {
		defer close(out)
		defer sub.Close()
		send := func(ev PeerEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
			case <-hctx.Done():
			}
			return false
		}
		for _, p := range h.h.Network().Peers() {
			c := h.h.Network().Connectedness(p)
			if !send(PeerEvent{Peer: p, Connected: true, Limited: c == network.Limited}) {
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-hctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok || !send(toPeerEvent(e)) {
					return
				}
			}
		}
	})
	if !ok {
		sub.Close()
		return nil, ErrClosed
	}
	return out, nil
}
