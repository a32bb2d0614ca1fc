// Package compose drives the docker-compose mesh in the repository's
// docker-compose.yml: a bootstrap peer and four peers, each its own
// container on a private network, running the image that
// scripts/docker-image.sh builds (FROM scratch, no registry).
//
// The bootstrap peer's multiaddr must be known before any container
// starts, and the image has no shell to read it from a file, so Up makes
// the bootstrap peer's identity on the host: an Ed25519 key written with
// p2p.LoadOrCreateIdentity into a directory that compose mounts as that
// peer's data dir, and its PeerID passed in MESHLLM_BOOT_PEER.
//
// `make demo-compose` (docker/compose-demo) and the opt-in test of this
// package (MESHLLM_COMPOSE=1) run the same Demo.
package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/p2p"
)

// Services are the compose services, the bootstrap peer first.
var Services = [...]string{"boot", "peer1", "peer2", "peer3", "peer4"}

// Config says where the compose file is and how to run it.
type Config struct {
	// Dir is the repository root, which holds docker-compose.yml.
	Dir string
	// Project is the compose project name; containers, the network and
	// volumes are named after it, so concurrent projects do not collide.
	Project string
	// Image is the image to run (default meshllm:local).
	Image string
	// Token is the API token every peer requires (default: a random one).
	Token string
	// Port and Port2 are the host ports (on 127.0.0.1) of peer1's and
	// peer2's HTTP APIs; "" picks free ones.
	Port, Port2 string
	// Log receives compose's output and progress lines; nil discards them.
	Log io.Writer
}

// Mesh is a running compose project.
type Mesh struct {
	cfg     Config
	compose []string // "docker compose" or "docker-compose"
	work    string   // the bootstrap peer's data dir lives here
	env     []string
	// BootPeer is the bootstrap peer's PeerID.
	BootPeer string
	// HTTP maps peer1 and peer2 to their published host:port.
	HTTP map[string]string
}

// composeCommand finds Compose: the docker plugin, else docker-compose.
func composeCommand(ctx context.Context) ([]string, error) {
	if exec.CommandContext(ctx, "docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}, nil
	}
	return nil, errors.New("compose: neither `docker compose` nor `docker-compose` is installed")
}

// Up makes the bootstrap peer's identity, starts the project and returns
// once compose reports the containers started and the published ports are
// known. On an error everything it started is removed again.
func Up(ctx context.Context, cfg Config) (_ *Mesh, err error) {
	if cfg.Image == "" {
		cfg.Image = "meshllm:local"
	}
	if cfg.Token == "" {
		cfg.Token = "demo-" + randomHex(8)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cmd, err := composeCommand(ctx)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "meshllm-compose-")
	if err != nil {
		return nil, err
	}
	m := &Mesh{cfg: cfg, compose: cmd, work: work, HTTP: map[string]string{}}
	defer func() {
		if err != nil {
			m.Down(context.WithoutCancel(ctx))
		}
	}()
	bootDir := m.BootDir()
	key, err := p2p.LoadOrCreateIdentity(bootDir)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	m.BootPeer = id.String()
	m.env = append(os.Environ(),
		"MESHLLM_IMAGE="+cfg.Image,
		"MESHLLM_API_TOKEN="+cfg.Token,
		"MESHLLM_BOOT_PEER="+m.BootPeer,
		"MESHLLM_BOOT_DIR="+bootDir,
		"MESHLLM_COMPOSE_PORT="+cfg.Port,
		"MESHLLM_COMPOSE_PORT2="+cfg.Port2,
	)
	fmt.Fprintf(cfg.Log, "compose: bootstrap peer /dns4/boot/tcp/4002/p2p/%s (key made on the host in %s)\n", m.BootPeer, bootDir)
	if _, err := m.run(ctx, "up", "-d", "--no-build"); err != nil {
		return nil, err
	}
	for _, svc := range []string{"peer1", "peer2"} {
		out, err := m.run(ctx, "port", svc, "8080")
		if err != nil {
			return nil, err
		}
		addr := strings.TrimSpace(out)
		if addr == "" || strings.HasSuffix(addr, ":0") {
			return nil, fmt.Errorf("compose: %s publishes no port: %q", svc, addr)
		}
		m.HTTP[svc] = addr
	}
	return m, nil
}

// Down stops and removes the project's containers, network and volumes,
// and the bootstrap peer's key. It is safe to call more than once.
func (m *Mesh) Down(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var err error
	if m.env != nil { // nil: Up failed before it started anything
		_, err = m.run(ctx, "down", "--volumes", "--remove-orphans", "--timeout", "5")
	}
	if m.work != "" {
		os.RemoveAll(m.work)
	}
	return err
}

// Logs returns the service's output (all services when svc is "").
func (m *Mesh) Logs(ctx context.Context, svc string) (string, error) {
	args := []string{"logs", "--no-color"}
	if svc != "" {
		args = append(args, svc)
	}
	return m.run(ctx, args...)
}

// PeerID reads the service's PeerID from the MESHLLM_PEER line it
// printed, waiting for it until ctx ends.
func (m *Mesh) PeerID(ctx context.Context, svc string) (string, error) {
	for {
		out, err := m.Logs(ctx, svc)
		if err == nil {
			if _, rest, ok := strings.Cut(out, "MESHLLM_PEER="); ok {
				id, _, _ := strings.Cut(rest, "\n")
				return strings.TrimSpace(id), nil
			}
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return "", fmt.Errorf("compose: %s printed no MESHLLM_PEER line: %w", svc, err)
		}
	}
}

// run runs one compose subcommand of the project and returns its stdout.
func (m *Mesh) run(ctx context.Context, args ...string) (string, error) {
	full := append(append([]string{}, m.compose[1:]...), "-p", m.cfg.Project, "-f", filepath.Join(m.cfg.Dir, "docker-compose.yml"))
	full = append(full, args...)
	c := exec.CommandContext(ctx, m.compose[0], full...)
	c.Dir = m.cfg.Dir
	c.Env = m.env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return stdout.String(), fmt.Errorf("compose %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	if args[0] != "logs" && args[0] != "port" {
		io.Copy(m.cfg.Log, &stderr)
	}
	return stdout.String(), nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Token returns the API token the peers require.
func (m *Mesh) Token() string { return m.cfg.Token }

// BootDir is the host directory holding the bootstrap peer's key, mounted
// as its /data; Down removes it.
func (m *Mesh) BootDir() string { return filepath.Join(m.work, "boot") }
