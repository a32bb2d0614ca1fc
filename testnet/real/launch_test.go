package real

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeJoinEnv makes the test binary act as a stand-in for `meshllm join`:
// it prints the address lines a real peer prints and serves a /v1/mesh
// that lists the peers whose IDs are in the data directories' parent.
const fakeJoinEnv = "MESHLLM_REAL_FAKE_JOIN"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeJoinEnv) {
	case "":
		os.Exit(m.Run())
	case "crash":
		fmt.Println("MESHLLM_PEER=doomed")
		os.Exit(3)
	default:
		os.Exit(fakeJoin(os.Args[1:]))
	}
}

func fakeJoin(args []string) int {
	var dir string
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) {
			dir = args[i+1]
		}
	}
	if dir == "" || args[0] != "join" {
		fmt.Fprintln(os.Stderr, "fake join: bad args", args)
		return 2
	}
	id := "id-" + filepath.Base(dir)
	ids := filepath.Join(filepath.Dir(dir), "ids")
	os.MkdirAll(ids, 0o755)
	os.WriteFile(filepath.Join(dir, "args"), []byte(strings.Join(args, "\n")), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/mesh", func(w http.ResponseWriter, r *http.Request) {
		entries, _ := os.ReadDir(ids)
		var peers []map[string]any
		for _, e := range entries {
			if e.Name() != id {
				peers = append(peers, map[string]any{"peer": e.Name(), "load": map[string]any{}})
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"peers": peers})
	})
	go http.Serve(ln, mux)
	port := ln.Addr().(*net.TCPAddr).Port
	fmt.Printf("MESHLLM_PEER=%s\nMESHLLM_HTTP=%s\n", id, ln.Addr())
	fmt.Printf("MESHLLM_ADDR=/ip4/127.0.0.1/udp/%d/quic-v1/p2p/%s\n", port, id)
	fmt.Printf("MESHLLM_ADDR=/ip4/127.0.0.1/tcp/%d/p2p/%s\n", port, id)
	os.WriteFile(filepath.Join(ids, id), nil, 0o644) // now the others see it
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return 0
}

// TestUpStartsAMeshAndCloses starts three stand-in peers: the first as the
// bootstrap node, the others through its TCP address; waits for the mesh
// to form; and ends them all.
func TestUpStartsAMeshAndCloses(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tn, err := Up(ctx, UpConfig{Binary: os.Args[0], Peers: 3, Model: "m.gguf", DataDir: dir,
		Args: []string{"--slots", "2"}, Env: []string{fakeJoinEnv + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	if err := tn.WaitMesh(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	boot := tn.Peers[0]
	if !boot.Bootstrap || !strings.Contains(boot.Addr, "/tcp/") || boot.ID != "id-peer-0" {
		t.Errorf("bootstrap peer %+v", boot)
	}
	for i, p := range tn.Peers {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("peer-%d", i), "args"))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(b), "\n")
		if !slices.Contains(args, "--loopback") || !slices.Contains(args, "m.gguf") || !slices.Contains(args, "--slots") {
			t.Errorf("peer %d args %q", i, args)
		}
		j := slices.Index(args, "--bootstrap")
		if i == 0 && !slices.Contains(args, "--bootstrap-node") {
			t.Errorf("peer 0 is not the bootstrap node: %q", args)
		}
		if i > 0 && (j < 0 || args[j+1] != boot.Addr) {
			t.Errorf("peer %d does not bootstrap from %s: %q", i, boot.Addr, args)
		}
		if tn.URLs()[i] != "http://"+p.HTTP {
			t.Errorf("URL %s", tn.URLs()[i])
		}
	}
	if err := tn.Close(); err != nil {
		t.Fatal(err)
	}
	var ended []int
	for range 3 {
		ended = append(ended, <-tn.Exited())
	}
	slices.Sort(ended)
	if !slices.Equal(ended, []int{0, 1, 2}) {
		t.Errorf("exited %v", ended)
	}
	if _, err := http.Get(tn.URLs()[1] + "/v1/mesh"); err == nil {
		t.Error("peer 1 still answers after Close")
	}
}

func TestUpReportsAPeerThatDies(t *testing.T) {
	_, err := Up(context.Background(), UpConfig{Binary: os.Args[0], Peers: 2, Model: "m", DataDir: t.TempDir(),
		Env: []string{fakeJoinEnv + "=crash"}})
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("err %v", err)
	}
}

func TestWaitMeshGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tn, err := Up(ctx, UpConfig{Binary: os.Args[0], Peers: 1, Model: "m", DataDir: t.TempDir(), Env: []string{fakeJoinEnv + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	// A second, unknown peer that never shows up.
	tn.Peers = append(tn.Peers, Peer{Index: 1, ID: "ghost", HTTP: tn.Peers[0].HTTP})
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if err := tn.WaitMesh(short, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "does not see peer 1") {
		t.Fatalf("err %v", err)
	}
}
