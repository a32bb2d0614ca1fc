package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/testnet/mmlu"
)

// Paths from this package's directory.
var (
	binPath   = filepath.Join("..", "..", "bin", "meshllm")
	modelPath = filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
	mmluDir   = filepath.Join("..", "..", mmlu.DefaultDir)
)

// needBinary skips the test when bin/meshllm or the model is missing:
// these tests run the real binary, which `make build` produces (make test
// builds it first).
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("fault tests start real meshllm processes")
	}
	for _, p := range []string{binPath, modelPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("fault tests need %s (run `make build`): %v", p, err)
		}
	}
}

// startPeer starts a loopback peer with its own data dir; the test's
// cleanup kills it and, when the test failed, logs its stderr.
func startPeer(t *testing.T, name string, args ...string) *Peer {
	t.Helper()
	p, err := Start(t.Context(), Spec{Bin: binPath, Model: modelPath, Name: name,
		DataDir: filepath.Join(t.TempDir(), name), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, lastLines(p.Stderr(), 40))
		}
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// holderMesh starts H alone, warms its cache with the 5-shot prefixes of
// subjects (alone, it cannot forward them: they land in its own cache),
// then starts A and C joining through H, and waits until A knows H's
// digest. Requests of those subjects sent to A are then forwarded to H.
func holderMesh(t *testing.T, subjects ...*mmlu.Subject) (h, a, c *Peer) {
	t.Helper()
	h = startPeer(t, "h")
	for _, s := range subjects {
		warm(t, h, s)
	}
	a = startPeer(t, "a", "--bootstrap", h.Addr())
	c = startPeer(t, "c", "--bootstrap", h.Addr())
	waitFor(t, "A to know H's digest and C", 60*time.Second, func() bool {
		return a.Knows(t.Context(), h.ID(), true) && a.Knows(t.Context(), c.ID(), false)
	})
	return h, a, c
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if err := WaitFor(t.Context(), what, d, cond); err != nil {
		t.Fatal(err)
	}
}

func subject(t *testing.T, name string) *mmlu.Subject {
	t.Helper()
	set, err := mmlu.Load(mmluDir)
	if err != nil {
		t.Skipf("MMLU data: %v", err)
	}
	s := set.Subject(name)
	if s == nil {
		t.Fatalf("no MMLU subject %q", name)
	}
	return s
}

// warm sends one request of subject s straight to p, so p's cache holds
// the subject's 5-shot prefix.
func warm(t *testing.T, p *Peer, s *mmlu.Subject) {
	t.Helper()
	if _, err := Complete(t.Context(), httpClient(), p.HTTP(), Ask{Prompt: s.FiveShot(0), MaxTokens: 2}); err != nil {
		t.Fatalf("warming %s on %s: %v", s.Name, p.Name(), err)
	}
}

// peerStatus is from's view of peer id.
func peerStatus(ctx context.Context, from *Peer, id string) (node.PeerStatus, bool) {
	s, err := from.Mesh(ctx, false)
	if err != nil {
		return node.PeerStatus{}, false
	}
	for _, q := range s.Peers {
		if string(q.Peer) == id {
			return q, true
		}
	}
	return node.PeerStatus{}, false
}

// fiveShots is a Driver.Ask sending subject s's 5-shot questions.
func fiveShots(s *mmlu.Subject, maxTokens int) func(w, seq int) Ask {
	return func(w, seq int) Ask { return Ask{Prompt: s.FiveShot(1 + w*1000 + seq), MaxTokens: maxTokens} }
}

// stories is a Driver.Ask sending short story openings: prompts too
// short for forwarding to pay, so the receiving peer serves them.
func stories(maxTokens int) func(w, seq int) Ask {
	names := []string{"Lily", "Tom", "Sue", "Ben"}
	return func(w, seq int) Ask {
		return Ask{Prompt: fmt.Sprintf("Once upon a time, %s found %d shiny stones.", names[(w+seq)%len(names)], seq), MaxTokens: maxTokens}
	}
}

func to(p *Peer) func(int, int) string { return func(int, int) string { return p.HTTP() } }

// runDriver starts d in the background; stop ends it and returns the
// results.
func runDriver(t *testing.T, d *Driver) (stop func() []Result) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Result, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var rs []Result
	stop = func() []Result {
		once.Do(func() { cancel(); rs = <-done })
		return rs
	}
	t.Cleanup(func() { stop() })
	return stop
}

// checkNoFailures fails the test for any failed or incomplete request.
func checkNoFailures(t *testing.T, rs []Result) Summary {
	t.Helper()
	s := Summarize(rs)
	if s.Requests == 0 {
		t.Fatal("the client sent no requests")
	}
	if s.Failures > 0 {
		t.Fatalf("%d of %d client requests failed: %s", s.Failures, s.Requests, strings.Join(s.Errors, "; "))
	}
	return s
}

// recentSince is p's recent routing decisions made at or after since.
func recentSince(t *testing.T, p *Peer, since time.Time) []node.DecisionRecord {
	t.Helper()
	s, err := p.Mesh(t.Context(), true)
	if err != nil {
		t.Fatalf("%s /v1/mesh: %v", p.Name(), err)
	}
	var out []node.DecisionRecord
	for _, r := range s.Recent {
		if !r.Time.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// httpClient is the tests' client for one-off requests.
func httpClient() *http.Client { return http.DefaultClient }

// watch polls cond every 50 ms from now on, in the background, and
// delivers the time it first held (nothing if the test ends first).
func watch(t *testing.T, cond func() bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for t.Context().Err() == nil {
			if cond() {
				ch <- time.Now()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return ch
}

// await waits for a watch to fire.
func await(t *testing.T, what string, ch <-chan time.Time, d time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	return time.Time{}
}

// decisionFor is p's recent decision for the request with maxTokens
// made after since.
func decisionFor(t *testing.T, p *Peer, since time.Time, maxTokens int) (node.DecisionRecord, bool) {
	t.Helper()
	for _, r := range recentSince(t, p, since) {
		if r.MaxTokens == maxTokens {
			return r, true
		}
	}
	return node.DecisionRecord{}, false
}
