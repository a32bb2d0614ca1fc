package simnet

import (
	"fmt"
	"time"
)

// Network is the simulated network between peers: every message from a to
// b arrives OneWay(a, b) + bytes/Bandwidth after it is sent. Links do not
// queue (a message never waits for another's transfer); a reply stream's
// pieces arrive in order.
type Network struct {
	// Link is the one-way latency of every link, unless Latency is set.
	Link time.Duration
	// Latency, when set, is the one-way latency of each ordered pair (an
	// N x N matrix; the diagonal is unused).
	Latency [][]time.Duration
	// Bandwidth is each link's bytes per second; 0 means 12.5e6 (100 Mbit/s).
	Bandwidth float64
}

// OneWay returns the one-way latency from a to b.
func (n Network) OneWay(a, b int) time.Duration {
	if a == b {
		return 0
	}
	if n.Latency != nil {
		return n.Latency[a][b]
	}
	return n.Link
}

// BytesPerSecond is each link's bandwidth, the default filled in.
func (n Network) BytesPerSecond() float64 {
	if n.Bandwidth > 0 {
		return n.Bandwidth
	}
	return 12.5e6
}

// Delay is how long a message of size bytes takes from a to b.
func (n Network) Delay(a, b, bytes int) time.Duration {
	if a == b {
		return 0
	}
	return n.OneWay(a, b) + time.Duration(float64(bytes)/n.BytesPerSecond()*float64(time.Second))
}

func (n Network) validate(peers int) error {
	if n.Link < 0 || n.Bandwidth < 0 {
		return fmt.Errorf("simnet: negative link latency or bandwidth")
	}
	if n.Latency != nil {
		if len(n.Latency) != peers {
			return fmt.Errorf("simnet: latency matrix has %d rows for %d peers", len(n.Latency), peers)
		}
		for _, row := range n.Latency {
			if len(row) != peers {
				return fmt.Errorf("simnet: latency matrix is not %d x %d", peers, peers)
			}
		}
	}
	return nil
}

// Wire sizes of the messages the harness sends (the p2p layer's framing is
// not modelled byte for byte).
const (
	requestOverhead = 512 // a forwarded request's frame besides its tokens
	pieceBytes      = 16  // a streamed reply piece (one token)
	busyBytes       = 64  // a busy answer
	pullBytes       = 64  // a snapshot pull request
)
