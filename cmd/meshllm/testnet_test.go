package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestTestnetUp runs `meshllm testnet up --peers 2` on stories260K (the
// children are this test binary acting as meshllm), waits for its
// MESHLLM_TARGETS= line, checks both peers answer, then stops it as Ctrl-C
// would and checks the peers are gone.
func TestTestnetUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real peers")
	}
	t.Setenv(asMainEnv, "1") // for the children only: TestMain read it at start
	pr, pw := io.Pipe()
	var stderr strings.Builder
	app := &cli.App{Writer: pw, ErrWriter: &lockedWriter{w: &stderr}, Commands: []*cli.Command{testnetCommand()}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{"meshllm", "testnet", "up", "--peers", "2", "--model", storiesPath,
			"--slots", "2", "--ctx", "1024", "--kv-cells", "4096", "--data", t.TempDir(), "--wait", "90s"})
		pw.Close()
	}()
	targets := make(chan []string, 1)
	var table []string
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MESHLLM_TARGETS="); ok {
				targets <- strings.Split(v, ",")
			} else {
				table = append(table, sc.Text())
			}
		}
		close(targets)
	}()
	var urls []string
	select {
	case urls = <-targets:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no MESHLLM_TARGETS line; stderr:\n%s", stderr.String())
	}
	if len(urls) != 2 || len(table) != 3 || !strings.Contains(table[1], "bootstrap") {
		t.Fatalf("targets %q, table:\n%s\nstderr:\n%s", urls, strings.Join(table, "\n"), stderr.String())
	}
	for _, u := range urls {
		resp, err := http.Get(u + "/v1/models")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s/v1/models: %v %v", u, err, resp)
		}
		resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("testnet up ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("testnet up did not stop")
	}
	for _, u := range urls {
		if resp, err := http.Get(u + "/v1/models"); err == nil {
			resp.Body.Close()
			t.Errorf("%s still answers after testnet up stopped", u)
		}
	}
}
