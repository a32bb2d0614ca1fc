// Command compose-demo runs the docker-compose mesh demo (make
// demo-compose): it brings up docker-compose.yml (a bootstrap peer and
// four peers, each its own container), waits until the mesh formed, warms
// a prefix on peer2, sends a same-prefix request through peer1, prints
// peer1's routing decision, and tears everything down, also on failure or
// Ctrl-C. With -keep it leaves the mesh running and prints how to reach
// and stop it.
//
// It needs the image meshllm:local (make image).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/meshllm/meshllm/testnet/compose"
)

func main() {
	dir := flag.String("dir", ".", "repository root (holds docker-compose.yml and ../shared/data/mmlu)")
	project := flag.String("project", "meshllm-demo", "compose project name")
	image := flag.String("image", "meshllm:local", "image to run (make image builds it)")
	port := flag.String("port", "", "host port of peer1's API on 127.0.0.1 (default: a free one)")
	keep := flag.Bool("keep", false, "leave the mesh running (stop it with: docker compose -p PROJECT down)")
	flag.Parse()
	if err := run(*dir, *project, *image, *port, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "compose-demo:", err)
		os.Exit(1)
	}
}

func run(dir, project, image, port string, keep bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	started := time.Now()
	m, err := compose.Up(ctx, compose.Config{Dir: root, Project: project, Image: image, Port: port, Log: os.Stdout})
	if err != nil {
		return err
	}
	defer func() {
		if keep && err == nil {
			return
		}
		if err != nil {
			if logs, lerr := m.Logs(context.WithoutCancel(ctx), ""); lerr == nil {
				fmt.Fprintf(os.Stderr, "--- container logs ---\n%s\n", tail(logs, 60))
			}
		}
		fmt.Println("tearing the mesh down")
		if derr := m.Down(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	fmt.Printf("peer1: http://%s/ (dashboard; API token %s)\npeer2: http://%s/\n", m.HTTP["peer1"], m.Token(), m.HTTP["peer2"])
	res, err := m.Demo(ctx, os.Stdout, started)
	if err != nil {
		return err
	}
	if !res.Forwarded() {
		return fmt.Errorf("the same-prefix request through %s was not forwarded to the prefix holder: decision %+v", res.Entry, res.Decision)
	}
	fmt.Printf("ok: %s forwarded the request to the peer holding its prefix\n", res.Entry)
	if keep {
		fmt.Printf("the mesh keeps running; stop it with:\n  MESHLLM_BOOT_PEER=%s docker-compose -p %s down --volumes && rm -rf %s\n(or docker compose), from %s\n",
			m.BootPeer, project, filepath.Dir(m.BootDir()), root)
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	end := len(s)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n < 0 {
				return s[i+1 : end]
			}
		}
	}
	return s
}
