package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/meshllm/meshllm/testnet/real"
	"github.com/urfave/cli/v2"
)

// testnetCommand is `meshllm testnet`: local meshes of real peers for
// experiments (`meshllm bench --target` drives them).
func testnetCommand() *cli.Command {
	return &cli.Command{
		Name:  "testnet",
		Usage: "run a mesh of real peers on this machine for experiments",
		Subcommands: []*cli.Command{
			testnetUpCommand(),
		},
	}
}

// testnetUpCommand is `meshllm testnet up`: N `meshllm join --loopback`
// processes, one of them the bootstrap node, kept running until Ctrl-C.
func testnetUpCommand() *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "start N real peers on loopback (one bootstrap node), wait for the mesh, run until Ctrl-C",
		Description: "Prints a table of the peers and a MESHLLM_TARGETS= line with their HTTP URLs, ready for\n" +
			"`meshllm bench --target URLS`. Each peer's stderr goes to DATA/peer-N/stderr.log.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "peers", Value: 4, Usage: "peers to start"},
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file every peer serves"},
			&cli.StringFlag{Name: "data", Usage: "directory for the peers' data (default: a temporary one, removed at exit)"},
			&cli.IntFlag{Name: "slots", Value: 16, Usage: "KV slots per peer (how many prefixes each keeps hot)"},
			&cli.IntFlag{Name: "ctx", Value: 4096, Usage: "context length per request (MMLU 5-shot prompts are 600 workload tokens on average, 2,750 at most)"},
			&cli.IntFlag{Name: "kv-cells", Usage: "KV cache size per peer in tokens (default: slots x ctx)"},
			&cli.IntFlag{Name: "threads", Value: 1, Usage: "CPU threads per peer's engine"},
			&cli.IntFlag{Name: "queue", Value: 64, Usage: "requests that may wait for a slot before a peer answers busy"},
			&cli.StringSliceFlag{Name: "join-arg", Usage: "extra flag for every `meshllm join` (repeatable, e.g. --join-arg=--wan)"},
			&cli.DurationFlag{Name: "wait", Value: 3 * time.Minute, Usage: "how long to wait for the peers to start and see each other"},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return testnetUp(ctx, c, c.App.Writer, c.App.ErrWriter)
		},
	}
}

// testnetUp runs `testnet up` until ctx ends or a peer exits: the table
// and the MESHLLM_TARGETS= line go to out, progress to errw.
func testnetUp(ctx context.Context, c *cli.Context, out, errw io.Writer) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	model, err := filepath.Abs(c.String("model"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(model); err != nil {
		return fmt.Errorf("testnet: model: %w", err)
	}
	dir := c.String("data")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "meshllm-testnet-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	args := []string{"--slots", strconv.Itoa(c.Int("slots")), "--ctx", strconv.Itoa(c.Int("ctx")),
		"--threads", strconv.Itoa(c.Int("threads")), "--queue", strconv.Itoa(c.Int("queue"))}
	if n := c.Int("kv-cells"); n > 0 {
		args = append(args, "--kv-cells", strconv.Itoa(n))
	}
	args = append(args, c.StringSlice("join-arg")...)
	// Up asks for each peer's stderr from several goroutines.
	var (
		mu   sync.Mutex
		logs []*os.File
	)
	defer func() {
		for _, f := range logs {
			f.Close()
		}
	}()
	cfg := real.UpConfig{Binary: bin, Peers: c.Int("peers"), Model: model, DataDir: dir, Args: args,
		StartTimeout: c.Duration("wait"),
		Stderr: func(i int) io.Writer {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("peer-%d", i), "stderr.log"))
			if err != nil {
				return nil
			}
			mu.Lock()
			logs = append(logs, f)
			mu.Unlock()
			return f
		}}
	fmt.Fprintf(errw, "testnet: starting %d peers on %s (data in %s)\n", cfg.Peers, filepath.Base(model), dir)
	tn, err := real.Up(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w (peer logs in %s)", err, dir)
	}
	defer tn.Close()
	wctx, cancel := context.WithTimeout(ctx, c.Duration("wait"))
	err = tn.WaitMesh(wctx, 250*time.Millisecond)
	cancel()
	if err != nil {
		return fmt.Errorf("%w (peer logs in %s)", err, dir)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tROLE\tHTTP\tID")
	for _, p := range tn.Peers {
		role := "peer"
		if p.Bootstrap {
			role = "bootstrap"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.Index, role, p.URL(), p.ID)
	}
	tw.Flush()
	fmt.Fprintf(out, "MESHLLM_TARGETS=%s\n", strings.Join(tn.URLs(), ","))
	fmt.Fprintf(errw, "testnet: mesh formed; try `%s bench --target %s --workload mmlu --requests 200`; Ctrl-C stops the peers\n",
		filepath.Base(bin), strings.Join(tn.URLs(), ","))
	select {
	case <-ctx.Done():
		return nil
	case i := <-tn.Exited():
		return fmt.Errorf("testnet: peer %d exited (its log: %s)", i, filepath.Join(dir, fmt.Sprintf("peer-%d", i), "stderr.log"))
	}
}
