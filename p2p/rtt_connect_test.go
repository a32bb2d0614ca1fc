package p2p

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/x/simlibp2p"
	"github.com/marcopolo/simnet"
)

// TestPingerMeasuresNewPeerAtOnce: a peer that connects between two ping
// rounds is measured when it connects, not a whole PingInterval later (the
// router does not forward to a peer with no RTT). Two QUIC hosts on a
// simulated 25 ms link, in virtual time: the estimate is the link's round
// trip, a second after connecting, with the next round an hour away.
func TestPingerMeasuresNewPeerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const oneWay = 25 * time.Millisecond
		link := simnet.LinkSettings{BitsPerSecond: 100 * simlibp2p.OneMbps}
		nw, meta, err := simlibp2p.SimpleLibp2pNetwork([]simlibp2p.NodeLinkSettingsAndCount{
			{LinkSettings: simnet.NodeBiDiLinkSettings{Uplink: link, Downlink: link}, Count: 2},
		}, simnet.StaticLatency(oneWay), simlibp2p.NetworkSettings{})
		if err != nil {
			t.Fatal(err)
		}
		nw.Start()
		defer nw.Close()
		a, b := meta.Nodes[0], meta.Nodes[1]
		defer a.Close()
		defer b.Close()

		cfg := DefaultRTTConfig()
		cfg.PingInterval = time.Hour
		est := NewRTTEstimator(cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); RunPinger(ctx, a, est, cfg, slog.New(slog.DiscardHandler)) }()
		synctest.Wait() // the first round found no peers

		if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		rtt, ok := est.RTT(b.ID())
		cancel()
		<-done
		if !ok {
			t.Fatal("no RTT for a peer connected a second ago: it waits for the next round")
		}
		if rtt < 2*oneWay || rtt > 2*oneWay+5*time.Millisecond {
			t.Fatalf("RTT %v over a %v one-way link", rtt, oneWay)
		}
	})
}
