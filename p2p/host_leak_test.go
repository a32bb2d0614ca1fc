package p2p

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHostCloseLeavesNoGoroutines starts a small mesh with every
// background task running (bootstrap, rendezvous, pinging, event
// subscribers), closes it, and checks that no goroutine of this package or
// of the hosts it built is left.
func TestHostCloseLeavesNoGoroutines(t *testing.T) {
	stacks := func() []string {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var own []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "meshllm/p2p.") && !strings.Contains(g, "TestHostCloseLeavesNoGoroutines") && !strings.Contains(g, "testing.tRunner") {
				own = append(own, g)
			}
		}
		return own
	}
	before := runtime.NumGoroutine()
	func() {
		bcfg := testConfig(true)
		bcfg.BootstrapNode = true
		boot, err := New(context.Background(), bcfg)
		if err != nil {
			t.Fatal(err)
		}
		defer boot.Close()
		var hosts []*Host
		for range 3 {
			cfg := testConfig(true)
			cfg.BootstrapPeers = bootstrapAddrs(boot)
			cfg.RTT.PingInterval = 20 * time.Millisecond
			h, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			hosts = append(hosts, h)
			if err := h.JoinNamespace(context.Background(), ModelNamespace("leak")); err != nil {
				t.Fatal(err)
			}
			if _, err := h.SubscribePeers(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 20*time.Second, "a connected mesh", func() bool { return fullyConnected(hosts) })
	}()
	waitFor(t, 20*time.Second, "goroutines to end after Close", func() bool {
		return len(stacks()) == 0 && runtime.NumGoroutine() <= before+5
	})
	if s := stacks(); len(s) > 0 {
		t.Fatalf("left behind:\n%s", strings.Join(s, "\n\n"))
	}
}
