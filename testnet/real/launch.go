package real

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// UpConfig configures Up.
type UpConfig struct {
	// Binary is the meshllm executable to run.
	Binary string
	// Peers is how many `meshllm join` processes to start (at least 1).
	Peers int
	// Model is the --model every peer serves.
	Model string
	// DataDir holds one data directory per peer (DataDir/peer-N).
	DataDir string
	// Args are extra `join` flags for every peer (engine sizes, threads...).
	Args []string
	// Env is added to every child's environment.
	Env []string
	// Stderr, when set, returns where peer i's stderr goes (nil: discarded).
	Stderr func(i int) io.Writer
	// StartTimeout bounds how long a peer may take to print its addresses;
	// 0 means 2 minutes (loading a model can be slow).
	StartTimeout time.Duration
}

// Peer is one running `meshllm join` process.
type Peer struct {
	Index int
	// ID is the libp2p peer ID, HTTP the API address (host:port), Addr a
	// TCP multiaddr other peers can bootstrap from.
	ID, HTTP, Addr string
	// Bootstrap is set on the peer started with --bootstrap-node.
	Bootstrap bool
}

// URL is the peer's HTTP API base URL.
func (p Peer) URL() string { return "http://" + p.HTTP }

// Testnet is a set of running peers. Its methods are safe for concurrent
// use; Close ends every child.
type Testnet struct {
	Peers []Peer

	mu     sync.Mutex
	cmds   []*exec.Cmd
	dones  []chan struct{} // closed when child i has been reaped
	exited chan int        // receives the index of a child that ended
	closed bool
}

// Up starts cfg.Peers `meshllm join --loopback` processes: peer 0 with
// --bootstrap-node, then the others together with --bootstrap set to peer
// 0's TCP address. It returns once every peer printed its addresses (it
// does not wait for the mesh to form: see WaitMesh). On failure, the
// processes already started are ended.
func Up(ctx context.Context, cfg UpConfig) (*Testnet, error) {
	if cfg.Peers < 1 {
		return nil, fmt.Errorf("real: %d peers", cfg.Peers)
	}
	if cfg.Binary == "" || cfg.Model == "" || cfg.DataDir == "" {
		return nil, errors.New("real: Up needs a binary, a model and a data directory")
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	tn := &Testnet{Peers: make([]Peer, cfg.Peers), cmds: make([]*exec.Cmd, cfg.Peers),
		dones: make([]chan struct{}, cfg.Peers), exited: make(chan int, cfg.Peers)}
	fail := func(err error) (*Testnet, error) {
		tn.Close()
		return nil, err
	}
	boot, err := tn.start(ctx, cfg, 0, "--bootstrap-node")
	if err != nil {
		return fail(err)
	}
	errs := make([]error, cfg.Peers)
	var wg sync.WaitGroup
	for i := 1; i < cfg.Peers; i++ {
		wg.Go(func() { _, errs[i] = tn.start(ctx, cfg, i, "--bootstrap", boot.Addr) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return tn, nil
}

// start runs peer i and waits for its MESHLLM_PEER, MESHLLM_HTTP and TCP
// MESHLLM_ADDR lines.
func (tn *Testnet) start(ctx context.Context, cfg UpConfig, i int, extra ...string) (Peer, error) {
	dir := filepath.Join(cfg.DataDir, fmt.Sprintf("peer-%d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Peer{}, err
	}
	args := []string{"join", "--model", cfg.Model, "--loopback", "--listen", "127.0.0.1:0", "--data-dir", dir}
	args = append(append(args, extra...), cfg.Args...)
	cmd := exec.Command(cfg.Binary, args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	setParentDeath(cmd)
	if cfg.Stderr != nil {
		cmd.Stderr = cfg.Stderr(i)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Peer{}, err
	}
	tn.mu.Lock()
	if tn.closed {
		tn.mu.Unlock()
		return Peer{}, errors.New("real: testnet closed")
	}
	if err := cmd.Start(); err != nil {
		tn.mu.Unlock()
		return Peer{}, fmt.Errorf("real: starting peer %d: %w", i, err)
	}
	reaped := make(chan struct{})
	tn.cmds[i], tn.dones[i] = cmd, reaped
	tn.mu.Unlock()

	p := Peer{Index: i, Bootstrap: i == 0}
	ready := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			if signalled {
				continue
			}
			switch k {
			case "MESHLLM_PEER":
				p.ID = v
			case "MESHLLM_HTTP":
				p.HTTP = v
			case "MESHLLM_ADDR":
				if p.Addr == "" && strings.Contains(v, "/tcp/") {
					p.Addr = v
				}
			}
			if p.ID != "" && p.HTTP != "" && p.Addr != "" {
				signalled = true
				close(ready)
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		<-ended
		cmd.Wait()
		close(reaped)
		tn.exited <- i // buffered for every peer: never blocks
	}()
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		tn.mu.Lock()
		tn.Peers[i] = p
		tn.mu.Unlock()
		return p, nil
	case <-ended:
		return Peer{}, fmt.Errorf("real: peer %d exited before printing its addresses", i)
	case <-timer.C:
		return Peer{}, fmt.Errorf("real: peer %d did not print its addresses within %s", i, cfg.StartTimeout)
	case <-ctx.Done():
		return Peer{}, ctx.Err()
	}
}

// Exited receives the index of each child that ends (a crash, or Close).
func (tn *Testnet) Exited() <-chan int { return tn.exited }

// URLs are the peers' HTTP API base URLs, in peer order.
func (tn *Testnet) URLs() []string {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	out := make([]string, len(tn.Peers))
	for i, p := range tn.Peers {
		out[i] = p.URL()
	}
	return out
}

// WaitMesh polls every peer's GET /v1/mesh each poll interval until each
// lists all the others with a load announcement heard, or ctx ends.
func (tn *Testnet) WaitMesh(ctx context.Context, poll time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	t := time.NewTicker(poll)
	defer t.Stop()
	last := "no answer yet"
	for {
		missing := tn.missing(ctx, hc)
		if missing == "" {
			return nil
		}
		if ctx.Err() == nil {
			last = missing // a poll cut short by ctx says less than the one before
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("real: mesh not formed: %s: %w", last, ctx.Err())
		case <-t.C:
		}
	}
}

// missing describes the first peer that does not yet see all the others,
// or returns "" when every peer does.
func (tn *Testnet) missing(ctx context.Context, hc *http.Client) string {
	tn.mu.Lock()
	peers := append([]Peer(nil), tn.Peers...)
	tn.mu.Unlock()
	for _, p := range peers {
		var st struct {
			Peers []struct {
				Peer string           `json:"peer"`
				Load *json.RawMessage `json:"load"`
			} `json:"peers"`
		}
		if err := getJSON(ctx, hc, http.MethodGet, p.URL()+"/v1/mesh", nil, &st); err != nil {
			return fmt.Sprintf("peer %d: %v", p.Index, err)
		}
		known := map[string]bool{}
		for _, q := range st.Peers {
			if q.Load != nil {
				known[q.Peer] = true
			}
		}
		for _, q := range peers {
			if q.Index != p.Index && !known[q.ID] {
				return fmt.Sprintf("peer %d does not see peer %d yet", p.Index, q.Index)
			}
		}
	}
	return ""
}

// Close ends every child: SIGTERM, then SIGKILL for those still running
// after 10 seconds. It returns once all have been reaped.
func (tn *Testnet) Close() error {
	tn.mu.Lock()
	if tn.closed {
		tn.mu.Unlock()
		return nil
	}
	tn.closed = true
	var running []*exec.Cmd
	var dones []chan struct{}
	for i, c := range tn.cmds {
		if c != nil {
			running, dones = append(running, c), append(dones, tn.dones[i])
		}
	}
	tn.mu.Unlock()
	for _, c := range running {
		c.Process.Signal(syscall.SIGTERM)
	}
	kill := time.AfterFunc(10*time.Second, func() {
		for _, c := range running {
			c.Process.Kill()
		}
	})
	defer kill.Stop()
	for _, d := range dones {
		<-d
	}
	return nil
}
