package p2p

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// serverHandlers counts the goroutines serving InferProtocol streams in
// this process (one per stream the resource manager admitted).
func serverHandlers() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*InferService).handle(") {
			n++
		}
	}
	return n
}

// TestInferFloodStaysBounded: one peer floods a serving peer with 64
// concurrent loops of 100k-token prompts (~200 KB request frames) while a
// second peer sends ordinary requests, five a second. Real hosts on
// loopback TCP, with the default resource-manager protocol limits, the
// service's stream limits and the per-peer rate limits in front of a
// handler that serves two requests at a time.
//
// Bounds checked: every honest request succeeds; the goroutines serving
// streams never exceed the resource manager's per-peer cap for the
// flooder (16) plus the honest peer's one, plus slack; the heap stays
// under 256 MiB above its start; after the flood the goroutine count
// returns to within 20 of where it started.
func TestInferFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("flood test")
	}
	server := newTestHost(t, testConfig(false))
	flooder := newTestHost(t, testConfig(false))
	honest := newTestHost(t, testConfig(false))
	for _, c := range []*Host{flooder, honest} {
		if err := c.LibP2P().Connect(context.Background(), peer.AddrInfo{ID: server.ID(), Addrs: server.LibP2P().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}

	engine := make(chan struct{}, 2) // two slots
	var served atomic.Int64
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		select {
		case engine <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-engine }()
		if err := send(InferPiece{Text: "ok", Tokens: 1}); err != nil {
			return nil, err
		}
		served.Add(1)
		return &InferFinal{PromptTokens: len(req.Prompt), GeneratedTokens: 1, FinishReason: "stop"}, nil
	}
	limits := DefaultRateLimits()
	limits.PromptTokensPerSec = 200_000 // two flood prompts a second
	limits.PromptTokenBurst = 400_000
	svc := NewInferService(server.LibP2P(), LimitHandler(handler, limits), InferServiceOptions{})
	t.Cleanup(func() { _ = svc.Close() })

	runtime.GC()
	goroutinesBefore := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc

	big := &InferRequest{ModelID: "m", Prompt: make([]int32, 100_000)}
	for i := range big.Prompt {
		big.Prompt[i] = int32(3 + i%500)
	}
	ctx, stop := context.WithCancel(context.Background())
	floodClient := NewInferClient(flooder.LibP2P(), InferClientOptions{IdleTimeout: 5 * time.Second})
	var wg sync.WaitGroup
	var floodOK, floodBusy, floodErr atomic.Int64
	for range 64 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := floodClient.Infer(ctx, server.ID(), big, nil)
				switch {
				case err == nil:
					floodOK.Add(1)
				case errors.Is(err, ErrBusy):
					floodBusy.Add(1)
				default:
					floodErr.Add(1) // reset by the resource manager, or cancelled
				}
			}
		})
	}

	// Sample goroutines and heap while the flood runs.
	var peakHandlers int
	var peakHeap uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			peakHandlers = max(peakHandlers, serverHandlers())
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peakHeap = max(peakHeap, m.HeapAlloc)
		}
	}()

	honestClient := NewInferClient(honest.LibP2P(), InferClientOptions{})
	small := &InferRequest{ModelID: "m", Prompt: []int32{1, 2, 3, 4}}
	start := time.Now()
	var honestLatency time.Duration
	// The honest peer stays within its rate (4/s, bursts of 16): 24
	// requests 200 ms apart.
	const honestRequests = 24
	pace := time.NewTicker(200 * time.Millisecond)
	defer pace.Stop()
	for i := range honestRequests {
		<-pace.C
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		_, err := honestClient.Infer(rctx, server.ID(), small, nil)
		cancel()
		if err != nil {
			rm := server.LibP2P().Network().ResourceManager()
			_ = rm.ViewTransient(func(s network.ResourceScope) error { t.Logf("transient %+v", s.Stat()); return nil })
			_ = rm.ViewSystem(func(s network.ResourceScope) error { t.Logf("system %+v", s.Stat()); return nil })
			_ = rm.ViewPeer(flooder.ID(), func(s network.PeerScope) error { t.Logf("flooder %+v", s.Stat()); return nil })
			_ = rm.ViewPeer(honest.ID(), func(s network.PeerScope) error { t.Logf("honest %+v", s.Stat()); return nil })
			_ = rm.ViewProtocol(InferProtocol, func(s network.ProtocolScope) error { t.Logf("infer %+v", s.Stat()); return nil })
			stop()
			wg.Wait()
			t.Fatalf("honest request %d failed during the flood: %v", i, err)
		}
		honestLatency = max(honestLatency, time.Since(t0))
	}
	flooded := time.Since(start)
	stop()
	wg.Wait()
	<-sampled

	t.Logf("flood for %v: flooder served %d, busy %d, reset/failed %d; honest %d/%d served, worst latency %v; "+
		"peak stream handlers %d, peak heap +%d MiB; service %+v",
		flooded.Round(time.Millisecond), floodOK.Load(), floodBusy.Load(), floodErr.Load(),
		honestRequests, honestRequests, honestLatency.Round(time.Millisecond),
		peakHandlers, (peakHeap-min(peakHeap, heapBefore))>>20, svc.Stats())
	if floodBusy.Load()+floodErr.Load() == 0 {
		t.Fatal("the flood was never refused: the limits did nothing")
	}
	perPeer := DefaultProtocolLimits()[InferProtocol].StreamsPerPeer
	if peakHandlers > perPeer+1+2 {
		t.Errorf("peak %d stream handlers, bound %d", peakHandlers, perPeer+3)
	}
	if growth := peakHeap - min(peakHeap, heapBefore); growth > 256<<20 {
		t.Errorf("heap grew by %d MiB during the flood", growth>>20)
	}
	pollUntil(t, 20*time.Second, "goroutines to settle after the flood", func() bool {
		return runtime.NumGoroutine() <= goroutinesBefore+20 && svc.Stats().Active == 0
	})
}
