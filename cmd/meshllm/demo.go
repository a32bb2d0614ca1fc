package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/meshllm/meshllm/p2p"
	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/meshllm/meshllm/testnet/sse"
	"github.com/urfave/cli/v2"
)

// defaultModelCandidates are where the demo looks for the tiny real model
// when --model is not given: next to the working directory (a checkout) and
// next to the binary (bin/meshllm in a checkout).
func defaultModelCandidates() []string {
	rel := filepath.Join("..", "shared", "models", "stories260K.gguf")
	c := []string{rel}
	if exe, err := os.Executable(); err == nil {
		c = append(c, filepath.Join(filepath.Dir(exe), "..", rel))
	}
	return c
}

func defaultMMLUCandidates() []string {
	c := []string{mmlu.DefaultDir}
	if exe, err := os.Executable(); err == nil {
		c = append(c, filepath.Join(filepath.Dir(exe), "..", mmlu.DefaultDir))
	}
	return c
}

// mmluDir is the MMLU data directory: --mmlu when given ("none" turns the
// MMLU part off), else the first default that exists ("" if none).
func mmluDir(c *cli.Context) (string, error) {
	if !c.IsSet("mmlu") {
		return firstExisting(defaultMMLUCandidates()), nil
	}
	dir := c.String("mmlu")
	if dir == "none" {
		return "", nil
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("--mmlu: %w (pass the MMLU folder, or none)", err)
	}
	return dir, nil
}

func firstExisting(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func demoCommand() *cli.Command {
	flags := append(engineFlags(),
		&cli.IntFlag{Name: "peers", Value: 3, Usage: "peers in the local mesh (the first is also the bootstrap peer)"},
		&cli.StringFlag{Name: "mmlu", Usage: "MMLU data directory, or none (default: ../shared/data/mmlu)"},
		&cli.BoolFlag{Name: "keep", Usage: "keep the mesh running after the demo requests, until Ctrl-C"})
	return &cli.Command{
		Name:  "demo",
		Usage: "start a local mesh of peers on the tiny stories260K model and send it real requests (the quick start)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.String("model") == "" {
				m := firstExisting(defaultModelCandidates())
				if m == "" {
					return fmt.Errorf("no model given and stories260K.gguf not found in %v: pass --model PATH", defaultModelCandidates())
				}
				c.Set("model", m)
			}
			if !c.IsSet("threads") {
				c.Set("threads", "1") // several engines share the cores; ggml threads spin
			}
			if !c.IsSet("slots") {
				c.Set("slots", "2")
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			dir, err := mmluDir(c)
			if err != nil {
				return err
			}
			return runDemo(ctx, c, os.Stdout, max(1, c.Int("peers")), dir)
		},
	}
}

// runDemo starts n peers in this process on loopback (peer 1 is also the
// bootstrap peer), then sends real requests through the OpenAI API: a
// streamed story, and two 5-shot MMLU prompts of one subject — the first
// warms peer n's cache, the second enters at peer 2 and is forwarded to
// peer n, which serves it from its KV cache.
func runDemo(ctx context.Context, c *cli.Context, out io.Writer, n int, mmluDir string) error {
	cfg, err := engineConfig(c)
	if err != nil {
		return err
	}
	var peers []*meshPeer
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()
	for i := range n {
		eng, err := loadWithProgress(cfg)
		if err != nil {
			return err
		}
		defer eng.Close()
		pcfg := p2p.LoopbackConfig()
		pcfg.BootstrapNode = i == 0
		if i > 0 {
			pcfg.BootstrapPeers = []string{peers[0].host.Addrs()[0].String()}
		}
		hcfg := httpapi.DefaultConfig()
		hcfg.ListenAddr = "127.0.0.1:0"
		p, err := startPeer(ctx, eng, peerConfig{p2p: pcfg, http: hcfg, policy: node.DefaultPolicy()})
		if err != nil {
			return err
		}
		peers = append(peers, p)
		fmt.Fprintf(out, "peer %d  %s  http://%s\n", i+1, p.host.ID(), p.httpAddr)
	}
	model := cfg.Name
	first := peers[0]
	fmt.Fprintf(out, "\n$ curl http://%s/v1/completions -d '{\"model\":%q,\"prompt\":\"Once upon a time\",\"stream\":true}'\n", first.httpAddr, model)
	r, err := streamCompletion(ctx, "http://"+first.httpAddr, model, "Once upon a time", 64, func(s string) { fmt.Fprint(out, s) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n[%d prompt tokens, %d generated, time to first token %s]\n", r.PromptTokens, r.CompletionTokens, r.TTFT.Round(time.Microsecond))
	if mmluDir == "" || n < 2 {
		return keepRunning(ctx, c, out, peers)
	}
	set, err := mmlu.Load(mmluDir)
	if err != nil {
		return err
	}
	sub := set.Subject("high_school_geography")
	sender := peers[n-1]
	if err := waitMesh(ctx, sender, peers[0], ""); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nTwo 5-shot MMLU prompts of %q (they share a %d-byte prefix):\n", sub.Name, len(sub.Prefix()))
	r, err = streamCompletion(ctx, "http://"+sender.httpAddr, model, sub.FiveShot(0), 4, func(string) {})
	if err != nil {
		return err
	}
	// The router may have sent this cold prompt to a peer it measured as
	// faster: find who served it, and send the next prompt elsewhere.
	holder := sender
	if d := lastDecision(sender); d != nil && d.ServedBy != "" {
		holder = peerByID(peers, d.ServedBy)
	}
	fmt.Fprintf(out, "  question 1 sent to peer %d, served by peer %d: %4d prompt tokens, %4d cached, time to first token %s\n",
		n, index(peers, holder), r.PromptTokens, r.CachedTokens, r.TTFT.Round(time.Microsecond))
	entry := peers[0]
	for _, p := range peers {
		if p != holder {
			entry = p
		}
	}
	if err := waitMesh(ctx, entry, holder, sub.FiveShot(1)); err != nil {
		return err
	}
	r, err = streamCompletion(ctx, "http://"+entry.httpAddr, model, sub.FiveShot(1), 4, func(string) {})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  question 2 sent to peer %d: %4d prompt tokens, %4d cached, time to first token %s\n", index(peers, entry), r.PromptTokens, r.CachedTokens, r.TTFT.Round(time.Microsecond))
	if d := lastDecision(entry); d != nil {
		where := "served locally"
		if d.ServedBy != "" {
			where = fmt.Sprintf("forwarded to peer %d", index(peers, peerByID(peers, d.ServedBy)))
		}
		fmt.Fprintf(out, "  peer %d's router: %s (expected %.0f ms locally, %.0f ms there; %d cached tokens expected, %d reused)\n",
			index(peers, entry), where, d.LocalCostMillis, d.PeerCostMillis, d.EstimatedCached, d.RealizedCached)
	}
	st := entry.router.Status(true)
	fmt.Fprintf(out, "\n$ meshllm status --api http://%s\n", entry.httpAddr)
	printStatus(out, &st)
	return keepRunning(ctx, c, out, peers)
}

func lastDecision(p *meshPeer) *node.DecisionRecord {
	rec := p.router.Recent()
	if len(rec) == 0 {
		return nil
	}
	return &rec[len(rec)-1]
}

func peerByID(peers []*meshPeer, id node.PeerID) *meshPeer {
	for _, p := range peers {
		if node.PeerID(p.host.ID().String()) == id {
			return p
		}
	}
	return peers[0]
}

// index is the 1-based number the demo prints for p.
func index(peers []*meshPeer, p *meshPeer) int {
	for i, q := range peers {
		if q == p {
			return i + 1
		}
	}
	return 0
}

// waitMesh waits until from's mesh view has to's load and RTT and, when
// prompt is set, until to's cache digest covers part of prompt: the gossip
// that routing needs.
func waitMesh(ctx context.Context, from, to *meshPeer, prompt string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id := node.PeerID(to.host.ID().String())
	var toks []int32
	if prompt != "" {
		var err error
		if toks, err = from.router.Tokenize(prompt); err != nil {
			return err
		}
	}
	for {
		v := from.router.Mesh().View(toks, node.LocalView{}, time.Now())
		for _, pv := range v.Peers {
			if pv.ID == id && pv.RTTKnown && pv.LoadAge >= 0 && pv.Slots > 0 && (prompt == "" || pv.EstimatedCached > 0) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			b, _ := json.Marshal(from.router.Status(false))
			return fmt.Errorf("the mesh did not form (%s): %w", b, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func keepRunning(ctx context.Context, c *cli.Context, out io.Writer, peers []*meshPeer) error {
	if !c.Bool("keep") {
		return nil
	}
	fmt.Fprintln(out, "\nthe mesh keeps running until Ctrl-C. Dashboards (a peer's routing decisions appear on its own page):")
	for i, p := range peers {
		fmt.Fprintf(out, "  peer %d  http://%s/\n", i+1, p.httpAddr)
	}
	fmt.Fprintf(out, "point a chat app at any of them, e.g. OpenAI base URL http://%s/v1 or OLLAMA_HOST=http://%s\n",
		peers[0].httpAddr, peers[0].httpAddr)
	<-ctx.Done()
	return nil
}

// demoResult is what the demo reads back from one streamed completion.
type demoResult struct {
	PromptTokens, CachedTokens, CompletionTokens int
	TTFT                                         time.Duration
}

// streamCompletion POSTs an OpenAI streaming completion and calls onText for
// each piece; the final usage chunk fills the result.
func streamCompletion(ctx context.Context, base, model, prompt string, maxTokens int, onText func(string)) (demoResult, error) {
	body, _ := json.Marshal(map[string]any{
		"model": model, "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return demoResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return demoResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return demoResult{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var res demoResult
	err = sse.Read(resp.Body, func(chunk sse.Chunk) error {
		for _, c := range chunk.Choices {
			if res.TTFT == 0 {
				res.TTFT = time.Since(start)
			}
			onText(c.Text)
		}
		if u := chunk.Usage; u != nil {
			res.PromptTokens, res.CompletionTokens, res.CachedTokens = u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens
		}
		return nil
	})
	return res, err
}
