package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/mmlu"
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

func firstExisting(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func demoCommand() *cli.Command {
	flags := append(engineFlags(), httpFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "mmlu", Usage: "MMLU data directory (default: ../shared/data/mmlu)"},
		&cli.BoolFlag{Name: "keep", Usage: "keep serving after the demo requests, until Ctrl-C"})
	return &cli.Command{
		Name:  "demo",
		Usage: "start a peer on the tiny stories260K model and send it real requests (the quick start)",
		Flags: flags,
		Action: func(c *cli.Context) error {
			if c.String("model") == "" {
				m := firstExisting(defaultModelCandidates())
				if m == "" {
					return fmt.Errorf("no model given and stories260K.gguf not found in %v: pass --model PATH", defaultModelCandidates())
				}
				c.Set("model", m)
			}
			if !c.IsSet("listen") {
				c.Set("listen", "127.0.0.1:0")
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			eng, err := loadEngine(c)
			if err != nil {
				return err
			}
			defer eng.Close()
			cfg := httpConfig(c)
			srv, err := node.NewServer(cfg, eng)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", cfg.ListenAddr)
			if err != nil {
				return err
			}
			addr := ln.Addr().String()
			serveCtx, stopServe := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(serveCtx, ln) }()
			printEndpoints(addr, eng.Info().Name)

			err = runDemo(ctx, os.Stdout, "http://"+addr, eng.Info().Name, firstExisting(append([]string{c.String("mmlu")}, defaultMMLUCandidates()...)))
			if err == nil && c.Bool("keep") {
				fmt.Fprintln(os.Stderr, "serving until Ctrl-C")
				<-ctx.Done()
			}
			stopServe()
			if serr := <-served; serr != nil && !errors.Is(serr, context.Canceled) && !errors.Is(serr, http.ErrServerClosed) {
				return serr
			}
			return err
		},
	}
}

// runDemo sends the quick start's requests through the OpenAI API and prints
// what a user should see: a streamed story, then two 5-shot MMLU prompts of
// one subject, the second served mostly from the KV cache.
func runDemo(ctx context.Context, out io.Writer, base, model, mmluDir string) error {
	fmt.Fprintf(out, "\n$ curl %s/v1/completions -d '{\"model\":%q,\"prompt\":\"Once upon a time\",\"stream\":true}'\n", base, model)
	r, err := streamCompletion(ctx, base, model, "Once upon a time", 64, func(s string) { fmt.Fprint(out, s) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n[%d prompt tokens, %d generated, time to first token %s]\n", r.PromptTokens, r.CompletionTokens, r.TTFT.Round(time.Microsecond))

	if mmluDir == "" {
		fmt.Fprintln(out, "(MMLU data not found: skipping the prefix-cache demo)")
		return nil
	}
	set, err := mmlu.Load(mmluDir)
	if err != nil {
		return err
	}
	sub := set.Subject("anatomy")
	fmt.Fprintf(out, "\nTwo 5-shot MMLU prompts of subject %q (they share a %d-byte prefix):\n", sub.Name, len(sub.Prefix()))
	for i := range 2 {
		r, err := streamCompletion(ctx, base, model, sub.FiveShot(i), 4, func(string) {})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  question %d: %4d prompt tokens, %4d cached, time to first token %s\n", i+1, r.PromptTokens, r.CachedTokens, r.TTFT.Round(time.Microsecond))
	}
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
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return res, nil
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			return res, fmt.Errorf("bad stream chunk %q: %w", line, err)
		}
		if chunk.Error != nil {
			return res, errors.New(chunk.Error.Message)
		}
		for _, c := range chunk.Choices {
			if res.TTFT == 0 {
				res.TTFT = time.Since(start)
			}
			onText(c.Text)
		}
		if u := chunk.Usage; u != nil {
			res.PromptTokens, res.CompletionTokens, res.CachedTokens = u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	return res, errors.New("stream ended without [DONE]")
}
