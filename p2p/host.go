package p2p

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// DHTProtocolPrefix is the prefix of the mesh's Kademlia protocols
// (/meshllm/kad/1.0.0): peers never join the public IPFS DHT.
const DHTProtocolPrefix = "/meshllm"

// ErrClosed is returned by methods of a closed Host.
var ErrClosed = errors.New("p2p: host closed")

// Host is a meshllm peer's libp2p side: the libp2p host (TCP and QUIC,
// Noise and TLS, resource and connection managers, NAT traversal), the
// Kademlia DHT, discovery (bootstrap peers, DHT rendezvous, mDNS), and
// the per-peer RTT estimate.
//
// All methods are safe for concurrent use. The Host runs its own
// goroutines (bootstrap, discovery, pinging, mDNS) until Close.
type Host struct {
	cfg       Config
	log       *slog.Logger
	h         host.Host
	dht       *dht.IpfsDHT
	disc      *drouting.RoutingDiscovery
	rtt       *RTTEstimator
	bootstrap []peer.AddrInfo
	closeMDNS func() error

	bootstrapped     chan struct{}
	bootstrappedOnce sync.Once

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	intro  *introducer // Introduce's dials (introduce.go)

	mu     sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New starts a peer's libp2p host as cfg says: it listens, joins the DHT,
// starts dialing the bootstrap peers in the background (see Bootstrapped)
// and, when enabled, mDNS and RTT pinging. ctx bounds start-up only; the
// Host runs until Close.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	priv, err := identity(&cfg)
	if err != nil {
		return nil, err
	}
	boot, err := ParseBootstrapPeers(cfg.BootstrapPeers)
	if err != nil {
		return nil, err
	}
	rm, err := resourceManager(&cfg)
	if err != nil {
		return nil, fmt.Errorf("p2p: resource manager: %w", err)
	}
	cm, err := connManager(&cfg)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("p2p: connection manager: %w", err)
	}

	mode := dht.ModeAuto
	switch {
	case cfg.BootstrapNode || cfg.DHTMode == DHTServer:
		mode = dht.ModeServer
	case cfg.DHTMode == DHTClient:
		mode = dht.ModeClient
	}
	var kdht *dht.IpfsDHT
	opts := []libp2p.Option{
		libp2p.Identity(priv),
		libp2p.ListenAddrStrings(cfg.ListenAddrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
		// Noise first: every libp2p implementation speaks it; TLS for
		// those that prefer it.
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.WithDialTimeout(cfg.DialTimeout),
		libp2p.UserAgent("meshllm"),
		libp2p.Routing(func(h host.Host) (routing.PeerRouting, error) {
			d, err := dht.New(h,
				dht.Mode(mode),
				dht.ProtocolPrefix(DHTProtocolPrefix),
				dht.BootstrapPeers(boot...),
			)
			kdht = d
			return d, err
		}),
	}
	if cfg.Metrics != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(cfg.Metrics))
	} else {
		opts = append(opts, libp2p.DisableMetrics())
	}
	opts = append(opts, natOptions(&cfg, boot)...)
	if cfg.ConnectionGater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.ConnectionGater))
	}

	lh, err := libp2p.New(opts...)
	if err != nil {
		// libp2p closes what it built, the resource manager included,
		// only on success paths; closing twice is harmless.
		cm.Close()
		rm.Close()
		if kdht != nil {
			kdht.Close()
		}
		return nil, fmt.Errorf("p2p: start host: %w", err)
	}

	hctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		cfg:          cfg,
		log:          log.With("peer", lh.ID().ShortString()),
		h:            lh,
		dht:          kdht,
		disc:         drouting.NewRoutingDiscovery(kdht),
		rtt:          NewRTTEstimator(cfg.RTT),
		bootstrap:    boot,
		bootstrapped: make(chan struct{}),
		ctx:          hctx,
		cancel:       cancel,
		intro:        &introducer{sem: make(chan struct{}, introduceInFlight), tried: map[peer.ID]time.Time{}},
	}
	if len(boot) == 0 {
		h.markBootstrapped()
	}
	if err := h.start(); err != nil {
		h.Close()
		return nil, err
	}
	h.log.Info("p2p host started", "id", lh.ID(), "addrs", h.Addrs(), "dht", mode, "bootstrap_node", cfg.BootstrapNode)
	return h, nil
}

// identity picks the configured key, the data directory's, or a fresh
// ephemeral one.
func identity(cfg *Config) (crypto.PrivKey, error) {
	switch {
	case cfg.Identity != nil:
		return cfg.Identity, nil
	case cfg.DataDir != "":
		return LoadOrCreateIdentity(cfg.DataDir)
	}
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	return priv, err
}

// start launches the background goroutines.
func (h *Host) start() error {
	sub, err := h.subscribeConnectedness()
	if err != nil {
		return err
	}
	h.goRun(func(ctx context.Context) {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				if ev := toPeerEvent(e); !ev.Connected {
					h.rtt.Forget(ev.Peer)
				}
			}
		}
	})
	h.goRun(newPinger(h.h, h.rtt, h.cfg.RTT, h.log).run)
	h.goRun(h.bootstrapLoop)
	if h.cfg.EnableMDNS {
		if err := h.startMDNS(); err != nil {
			return err
		}
	}
	return nil
}

// goRun runs f in a goroutine that Close waits for; f's context ends at
// Close. It reports false when the host is closed.
func (h *Host) goRun(f func(ctx context.Context)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f(h.ctx)
	}()
	return true
}

// ID returns the peer's ID.
func (h *Host) ID() peer.ID { return h.h.ID() }

// Addrs returns the peer's full multiaddrs (each ending in /p2p/ID): the
// ones to print for others to bootstrap from. Listening on 0.0.0.0 expands
// to every interface; observed, mapped and relayed addresses join as
// they are learnt.
func (h *Host) Addrs() []ma.Multiaddr {
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: h.h.ID(), Addrs: h.h.Addrs()})
	if err != nil {
		return nil
	}
	return addrs
}

// LibP2P returns the underlying libp2p host, for protocols and pubsub.
func (h *Host) LibP2P() host.Host { return h.h }

// DHT returns the Kademlia DHT.
func (h *Host) DHT() *dht.IpfsDHT { return h.dht }

// Peers returns the peers with at least one open connection.
func (h *Host) Peers() []peer.ID { return h.h.Network().Peers() }

// RTT returns the current round-trip estimate to p (see RTTEstimator),
// false when p was never measured or has disconnected.
func (h *Host) RTT(p peer.ID) (time.Duration, bool) { return h.rtt.RTT(p) }

// RTTStats returns the estimator's details for p.
func (h *Host) RTTStats(p peer.ID) (RTTStats, bool) { return h.rtt.Stats(p) }

// ObserveRTT feeds a round-trip sample for p measured elsewhere (for
// example request-to-first-byte of a stream, minus the peer's reported
// processing time).
func (h *Host) ObserveRTT(p peer.ID, d time.Duration) { h.rtt.Observe(p, d) }

// Close stops the background work, the DHT and the libp2p host, closing
// every connection. It is idempotent.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.cancel()
		h.wg.Wait()
		var errs []error
		if h.closeMDNS != nil {
			errs = append(errs, h.closeMDNS())
		}
		if h.dht != nil {
			errs = append(errs, h.dht.Close())
		}
		errs = append(errs, h.h.Close())
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}
