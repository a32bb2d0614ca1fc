package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/p2p"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// meshFlags configure the p2p side of `meshllm join`.
func meshFlags() []cli.Flag {
	d := p2p.DefaultConfig()
	return []cli.Flag{
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "p2p-listen", Value: cli.NewStringSlice(d.ListenAddrs...), EnvVars: []string{"MESHLLM_P2P_LISTEN"},
			Usage: "libp2p listen multiaddrs (TCP and QUIC)"}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "bootstrap", EnvVars: []string{"MESHLLM_BOOTSTRAP"},
			Usage: "multiaddr of a peer to join through (repeatable); a bootstrap peer prints its own"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "data-dir", Value: defaultDataDir(), EnvVars: []string{"MESHLLM_DATA_DIR"},
			Usage: "where the peer keeps its identity key"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "bootstrap-node", EnvVars: []string{"MESHLLM_BOOTSTRAP_NODE"},
			Usage: "also act as a bootstrap/relay peer: DHT server, AutoNAT and circuit-relay service"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "mdns", Value: d.EnableMDNS, EnvVars: []string{"MESHLLM_MDNS"},
			Usage: "find peers on the local network with mDNS"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "loopback", EnvVars: []string{"MESHLLM_LOOPBACK"},
			Usage: "testnet preset for many peers on one machine: 127.0.0.1, random ports, DHT server, no NAT traversal"}),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "wan", EnvVars: []string{"MESHLLM_WAN"},
			Usage: "routing policy for peers across the internet (larger margins, staler digests tolerated)"}),
	}
}

func defaultDataDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "meshllm")
	}
	return ".meshllm"
}

func joinCommand() *cli.Command {
	flags := append(engineFlags(), httpFlags()...)
	return withConfigFile(&cli.Command{
		Name:  "join",
		Usage: "serve a model and join the mesh: route each request to the peer that holds its prefix when that is faster",
		Flags: append(append(flags, meshFlags()...), accessFlagDefs()...),
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return join(ctx, c)
		},
	})
}

// p2pConfig builds the libp2p configuration from the flags.
func p2pConfig(c *cli.Context) p2p.Config {
	cfg := p2p.DefaultConfig()
	if c.Bool("loopback") {
		cfg = p2p.LoopbackConfig()
	}
	if c.IsSet("p2p-listen") || !c.Bool("loopback") {
		cfg.ListenAddrs = c.StringSlice("p2p-listen")
	}
	cfg.BootstrapPeers = c.StringSlice("bootstrap")
	cfg.DataDir = c.String("data-dir")
	cfg.BootstrapNode = c.Bool("bootstrap-node")
	if c.IsSet("mdns") || !c.Bool("loopback") {
		cfg.EnableMDNS = c.Bool("mdns")
	}
	cfg.Logger = slog.Default()
	return cfg
}

// join runs one mesh peer until ctx ends.
func join(ctx context.Context, c *cli.Context) error {
	if c.Bool("loopback") && !c.IsSet("threads") {
		// Many peers share this machine's cores, and ggml's threads
		// spin-wait: one thread each avoids the oversubscription stalls.
		c.Set("threads", "1")
	}
	// Secrets first: a bad key file is reported before the model loads.
	acc, err := accessFlags(c)
	if err != nil {
		return err
	}
	hcfg, err := httpConfig(c)
	if err != nil {
		return err
	}
	eng, err := loadEngine(c)
	if err != nil {
		return err
	}
	defer eng.Close()
	emb, err := loadEmbedder(c)
	if err != nil {
		return err
	}
	if emb != nil {
		defer emb.Close()
	}
	policy := node.DefaultPolicy()
	if c.Bool("wan") {
		policy = node.WANPolicy()
	}
	p, err := startPeer(ctx, eng, peerConfig{p2p: p2pConfig(c), http: hcfg, policy: policy, access: acc, events: os.Stderr, embed: embeddingsOf(emb)})
	if err != nil {
		return err
	}
	printJoin(p.host, p.httpAddr, eng.Info().Name)
	printForward(os.Stderr, acc)
	return p.wait()
}

// printJoin tells the user who the peer is and how to use it.
func printJoin(h *p2p.Host, httpAddr, model string) {
	fmt.Fprintf(os.Stderr, "peer %s\n", h.ID())
	for _, a := range h.Addrs() {
		fmt.Fprintf(os.Stderr, "  bootstrap others with: --bootstrap %s\n", a)
	}
	printEndpoints(httpAddr, model)
	fmt.Fprintf(os.Stderr, "  dashboard: http://%s/   mesh: http://%s/v1/mesh   (meshllm status --api http://%s)\n", httpAddr, httpAddr, httpAddr)
	// Machine-readable lines for scripts and tests.
	fmt.Printf("MESHLLM_PEER=%s\nMESHLLM_HTTP=%s\n", h.ID(), httpAddr)
	for _, a := range h.Addrs() {
		fmt.Printf("MESHLLM_ADDR=%s\n", a)
	}
}
