package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec describes one `meshllm join` process.
type Spec struct {
	// Bin is the meshllm binary; Model the GGUF file it serves.
	Bin, Model string
	// Name labels the peer in logs and errors.
	Name string
	// DataDir holds the peer's identity key: a restart with the same
	// DataDir is the same peer ID.
	DataDir string
	// Args are extra `join` flags (e.g. --bootstrap ADDR).
	Args []string
	// StartTimeout bounds the wait for the peer's address lines (default
	// 60 s).
	StartTimeout time.Duration
}

// Peer is a running (or stopped) `meshllm join` process on loopback. Its
// HTTP, ID and Addr change only across Restart. Kill, Stop, Cont and
// Restart are meant for one goroutine (the fault injector); the getters
// are safe for concurrent use.
type Peer struct {
	spec Spec

	mu     sync.Mutex
	cmd    *exec.Cmd
	http   string
	id     string
	addr   string
	exited chan struct{}
	stderr *tail
}

// Start runs `meshllm join` with spec and waits until it printed its HTTP
// address, peer ID and a TCP multiaddr.
func Start(ctx context.Context, spec Spec) (*Peer, error) {
	if spec.StartTimeout == 0 {
		spec.StartTimeout = 60 * time.Second
	}
	p := &Peer{spec: spec, stderr: newTail(64 << 10)}
	return p, p.start(ctx)
}

// args are the flags of a loopback peer sized for stories260K and a few
// peers on two cores.
func (p *Peer) args() []string {
	base := []string{"join", "--model", p.spec.Model, "--loopback", "--listen", "127.0.0.1:0",
		"--data-dir", p.spec.DataDir, "--slots", "2", "--kv-cells", "4096", "--queue", "16"}
	return append(base, p.spec.Args...)
}

func (p *Peer) start(ctx context.Context) error {
	cmd := exec.Command(p.spec.Bin, p.args()...)
	dieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.http, p.id, p.addr = cmd, exited, "", "", ""
	p.mu.Unlock()

	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			p.mu.Lock()
			switch k {
			case "MESHLLM_HTTP":
				p.http = v
			case "MESHLLM_PEER":
				p.id = v
			case "MESHLLM_ADDR":
				if p.addr == "" && strings.Contains(v, "/tcp/") {
					p.addr = v
				}
			}
			done := !seen && p.http != "" && p.id != "" && p.addr != ""
			p.mu.Unlock()
			if done {
				seen = true
				close(ready)
			}
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(exited)
	}()
	timer := time.NewTimer(p.spec.StartTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before it was ready:\n%s", p.spec.Name, p.stderr)
	case <-timer.C:
	case <-ctx.Done():
	}
	p.Kill()
	return fmt.Errorf("%s was not ready after %s:\n%s", p.spec.Name, p.spec.StartTimeout, p.stderr)
}

// Name is the peer's label.
func (p *Peer) Name() string { return p.spec.Name }

// HTTP is the host:port of the peer's API.
func (p *Peer) HTTP() string { p.mu.Lock(); defer p.mu.Unlock(); return p.http }

// ID is the peer's libp2p ID.
func (p *Peer) ID() string { p.mu.Lock(); defer p.mu.Unlock(); return p.id }

// Addr is a /p2p/ multiaddr others can bootstrap from.
func (p *Peer) Addr() string { p.mu.Lock(); defer p.mu.Unlock(); return p.addr }

// Stderr is the end of the process's log.
func (p *Peer) Stderr() string { return p.stderr.String() }

// Running reports whether the process has not exited.
func (p *Peer) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process.
func (p *Peer) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	return cmd.Process.Signal(sig)
}

// Kill SIGKILLs the process (a crash: no goodbye to anyone) and waits
// until it is gone. A stopped process is killed too.
func (p *Peer) Kill() error { return p.end(syscall.SIGKILL, 10*time.Second) }

// Terminate sends SIGTERM (a graceful shutdown) and waits up to grace for
// the exit, then kills.
func (p *Peer) Terminate(grace time.Duration) error {
	if err := p.end(syscall.SIGTERM, grace); err == nil {
		return nil
	}
	return p.Kill()
}

func (p *Peer) end(sig syscall.Signal, wait time.Duration) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if !p.Running() {
		return nil
	}
	if err := p.signal(sig); err != nil && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if sig == syscall.SIGKILL {
		p.signal(syscall.SIGCONT) // harmless; a stopped process dies on SIGKILL anyway
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("%s did not exit within %s of %v", p.spec.Name, wait, sig)
	}
}

// Stop freezes the process with SIGSTOP: its sockets stay open and the
// kernel still accepts connections, but it never answers — a stalled peer.
func (p *Peer) Stop() error { return p.signal(syscall.SIGSTOP) }

// Cont resumes a stopped process.
func (p *Peer) Cont() error { return p.signal(syscall.SIGCONT) }

// Restart starts the process again with the same data dir (the same peer
// ID, but a new cache epoch and an empty cache) and the same flags, or
// args instead when given (a first peer that bootstrapped from no one
// needs a --bootstrap to find the mesh again). The process must have
// exited.
func (p *Peer) Restart(ctx context.Context, args ...string) error {
	if p.Running() {
		return fmt.Errorf("%s: restart of a running process", p.spec.Name)
	}
	if args != nil {
		p.spec.Args = args
	}
	return p.start(ctx)
}

// tail keeps the last max bytes written to it. Safe for concurrent use.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
