package p2p

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// TestPingerMeasuresLinkLatency runs the pinger over a mocknet link that
// delays every write by 20 ms each way, in virtual time: the estimate must
// be the 40 ms round trip (a millisecond of slack for the extra writes of
// stream setup).
func TestPingerMeasuresLinkLatency(t *testing.T) {
	synctest.Test(t, pingerMeasuresLinkLatency)
}

func pingerMeasuresLinkLatency(t *testing.T) {
	const latency = 20 * time.Millisecond
	mn := mocknet.New()
	defer mn.Close()
	mn.SetLinkDefaults(mocknet.LinkOptions{Latency: latency})
	a, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	b, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	ping.NewPingService(a)
	ping.NewPingService(b)
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}

	clk := newFakeClock()
	cfg := DefaultRTTConfig()
	cfg.Now = clk.Now
	est := NewRTTEstimator(cfg)
	p := newPinger(a, est, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 {
		p.round(ctx)
		clk.Advance(cfg.PingInterval)
	}
	st, ok := est.Stats(b.ID())
	if !ok {
		t.Fatal("no RTT sample after 5 ping rounds")
	}
	t.Logf("link latency %v: RTT estimate %v, min %v, last %v over %d rounds", latency, st.Smoothed, st.Min, st.Last, st.Samples)
	if st.Samples != 5 {
		t.Errorf("%d samples, want one a round (5)", st.Samples)
	}
	if lo, hi := 2*latency, 2*latency+time.Millisecond; st.Smoothed < lo || st.Smoothed > hi || st.Min < lo {
		t.Fatalf("RTT estimate %v (min %v) not within [%v, %v] for a %v link", st.Smoothed, st.Min, lo, hi, latency)
	}
}
