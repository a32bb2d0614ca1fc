package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshllm/meshllm/testnet/mmlu"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// asMainEnv makes the test binary behave as the meshllm command, so the
// multi-process tests run real `meshllm join` processes without a separate
// build.
const asMainEnv = "MESHLLM_TEST_AS_MAIN"

// proc is one `meshllm join` process.
type proc struct {
	cmd    *exec.Cmd
	http   string // 127.0.0.1:port
	addr   string // a /p2p/ multiaddr to bootstrap from
	peerID string
	stderr *strings.Builder
}

// startJoin starts `meshllm join` with args on loopback and waits until it
// prints its addresses.
func startJoin(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	base := []string{"join", "--model", storiesPath, "--loopback", "--listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(t.TempDir(), name), "--slots", "2", "--kv-cells", "4096", "--queue", "8"}
	cmd := exec.Command(os.Args[0], append(base, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.stderr)
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), "=")
			switch k {
			case "MESHLLM_HTTP":
				p.http = v
			case "MESHLLM_PEER":
				p.peerID = v
			case "MESHLLM_ADDR":
				if p.addr == "" && strings.Contains(v, "/tcp/") {
					p.addr = v
					close(ready)
				}
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start:\n%s", name, p.stderr)
	}
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// meshStatus is the part of GET /v1/mesh the tests read.
type meshStatus struct {
	Peers []struct {
		Peer         string  `json:"peer"`
		RTTMs        float64 `json:"rtt_ms"`
		DigestBlocks int     `json:"digest_blocks"`
		Load         *struct {
			PrefillTokPerSec float64 `json:"prefill_tok_per_sec"`
		} `json:"load"`
	} `json:"peers"`
}

func (p *proc) mesh(t *testing.T) meshStatus {
	t.Helper()
	var s meshStatus
	resp, err := http.Get("http://" + p.http + "/v1/mesh")
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&s)
	return s
}

// metric returns the sum of the samples of a Prometheus metric whose line
// starts with prefix (name plus optional labels).
func (p *proc) metric(t *testing.T, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

// waitFor polls cond until it holds or the deadline passes. Network
// convergence (DHT, gossip mesh) has no event to wait on from outside the
// processes; the deadline is generous and only a hang trips it.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) knows(t *testing.T, peerID string, withDigest bool) bool {
	for _, q := range p.mesh(t).Peers {
		if q.Peer == peerID && q.Load != nil && q.RTTMs > 0 && (!withDigest || q.DigestBlocks > 0) {
			return true
		}
	}
	return false
}

func openaiClient(p *proc) openai.Client {
	return openai.NewClient(option.WithBaseURL("http://"+p.http+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func fiveShot(t *testing.T, i int) string {
	set, err := mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
	if err != nil {
		t.Fatal(err)
	}
	return set.Subject("high_school_geography").FiveShot(i)
}

// threePeers starts a bootstrap peer and two peers joining through it, and
// waits until A sees B in its mesh view.
func threePeers(t *testing.T) (boot, a, b *proc) {
	boot = startJoin(t, "boot", "--bootstrap-node")
	a = startJoin(t, "a", "--bootstrap", boot.addr)
	b = startJoin(t, "b", "--bootstrap", boot.addr)
	waitFor(t, "A to learn B's load and RTT", 60*time.Second, func() bool { return a.knows(t, b.peerID, false) })
	return boot, a, b
}

// digestBlocks is how many cache blocks p's view says holder advertises.
func (p *proc) digestBlocks(t *testing.T, holder *proc) int {
	for _, q := range p.mesh(t).Peers {
		if q.Peer == holder.peerID {
			return q.DigestBlocks
		}
	}
	return 0
}

// warm sends prompt to p and returns the peer that served it: p's router
// may send a cold prompt to a peer it measured as faster.
func warm(t *testing.T, p *proc, prompt string, all ...*proc) *proc {
	t.Helper()
	c := openaiClient(p)
	if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel("stories260K"),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(2), Temperature: openai.Float(0),
	}); err != nil {
		t.Fatal(err)
	}
	return lastServedBy(t, p, all...)
}

// lastServedBy is the peer that served p's latest request (p itself when
// it served it, or when the server is not among all).
func lastServedBy(t *testing.T, p *proc, all ...*proc) *proc {
	t.Helper()
	var st struct {
		Recent []struct {
			ServedBy string `json:"served_by"`
		} `json:"recent"`
	}
	resp, err := http.Get("http://" + p.http + "/v1/mesh?recent=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&st)
	if n := len(st.Recent); n > 0 && st.Recent[n-1].ServedBy != "" {
		for _, q := range all {
			if q.peerID == st.Recent[n-1].ServedBy {
				return q
			}
		}
	}
	return p
}

// warmPrefix warms the 5-shot prefix on one of the peers and returns the
// peer that holds it and another peer whose view already shows it.
func warmPrefix(t *testing.T, all ...*proc) (holder, entry *proc) {
	t.Helper()
	first := all[len(all)-1]
	var before []int
	for _, p := range all {
		before = append(before, p.digestBlocks(t, first))
	}
	holder = warm(t, first, fiveShot(t, 0), all...)
	for i, p := range all {
		if p == holder {
			continue
		}
		entry = p
		base := 0
		if holder == first {
			base = before[i]
		}
		// The 5-shot prompt is about 68 blocks; the peers' start-up
		// self-measurements advertise a few blocks of their own.
		waitFor(t, "the holder's digest to reach the entry peer", 30*time.Second, func() bool {
			return p.digestBlocks(t, holder) >= base+50
		})
		break
	}
	return holder, entry
}

// TestMeshForwardsToPrefixHolder: a prefix warmed on one peer; the
// same-prefix request sent to another is forwarded to it and served from
// its cache.
func TestMeshForwardsToPrefixHolder(t *testing.T) {
	boot, a, b := threePeers(t)
	holder, entry := warmPrefix(t, boot, a, b)
	c := openaiClient(entry)
	r, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel("stories260K"),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(fiveShot(t, 1))},
		MaxTokens: openai.Int(4), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Usage.PromptTokensDetails.CachedTokens; got < 500 {
		t.Fatalf("request via the entry peer reused %d cached tokens; the holder has the 5-shot prefix", got)
	}
	if got := entry.metric(t, `meshllm_router_served_total{where="peer"}`); got != 1 {
		t.Fatalf("the entry peer forwarded %v requests, want 1", got)
	}
	if got := holder.metric(t, `meshllm_router_forwarded_in_total`); got < 1 {
		t.Fatalf("the holder served %v forwarded requests", got)
	}
	if got := entry.metric(t, `meshllm_gossip_bytes_in_total`); got <= 0 {
		t.Fatalf("the entry peer reports %v gossip bytes received", got)
	}
}

// TestMeshSurvivesPeerKilledMidStream: the holder is SIGKILLed while it
// streams a forwarded reply; the client still gets a complete answer.
func TestMeshSurvivesPeerKilledMidStream(t *testing.T) {
	boot, a, b := threePeers(t)
	holder, entry := warmPrefix(t, boot, a, b)
	ctx := context.Background()
	ce := openaiClient(entry)
	// The router weighs measured speeds, which are noisy on a shared CPU:
	// a request may be served locally. Ask again (other questions of the
	// same subject) until one is forwarded, then kill the holder under it.
	for q := 1; q <= 5; q++ {
		forwardsBefore := entry.metric(t, `meshllm_router_decisions_total{reason="forwarded"}`)
		stream := ce.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:         openai.CompletionNewParamsModel("stories260K"),
			Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(fiveShot(t, q))},
			MaxTokens:     openai.Int(80), // long enough to be cut mid-stream, short enough that prefill dominates
			Temperature:   openai.Float(0),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var text strings.Builder
		finish, chunks, killed := "", 0, false
		var usage openai.CompletionUsage
		for stream.Next() {
			ch := stream.Current()
			for _, c := range ch.Choices {
				text.WriteString(c.Text)
				if c.FinishReason != "" {
					finish = string(c.FinishReason)
				}
			}
			if ch.Usage.CompletionTokens > 0 {
				usage = ch.Usage
			}
			chunks++
			if chunks == 1 && entry.metric(t, `meshllm_router_decisions_total{reason="forwarded"}`) > forwardsBefore {
				holder.cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("client saw an error (holder killed: %v): %v", killed, err)
		}
		if finish == "" || usage.CompletionTokens == 0 || text.Len() == 0 {
			t.Fatalf("incomplete answer: finish %q, usage %+v, %d chunks", finish, usage, chunks)
		}
		if !killed {
			continue
		}
		if got := entry.metric(t, `meshllm_router_fallbacks_total{cause=`); got < 1 {
			t.Fatalf("the entry peer recorded %v fallbacks; the serving peer died mid-stream", got)
		}
		t.Logf("answer of %d tokens (%s) after the serving peer was killed mid-stream; %d chunks", usage.CompletionTokens, finish, chunks)
		return
	}
	t.Fatal("no request was forwarded to the prefix holder in 5 tries")
}

// TestTwentyPeersFindEachOther: 20 peers that only know one bootstrap peer
// find each other through the DHT and gossip.
func TestTwentyPeersFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 21 processes")
	}
	boot := startJoin(t, "boot", "--bootstrap-node", "--kv-cells", "512", "--slots", "1")
	var peers []*proc
	for i := range 20 {
		peers = append(peers, startJoin(t, fmt.Sprintf("p%d", i), "--bootstrap", boot.addr, "--kv-cells", "512", "--slots", "1"))
	}
	waitFor(t, "every peer to see the 20 others", 120*time.Second, func() bool {
		for _, p := range peers {
			if len(p.mesh(t).Peers) < 20 { // 19 others + the bootstrap peer
				return false
			}
		}
		return true
	})
}

// TestPrivateMeshRefusesOutsiders: peers holding the mesh passphrase form
// a mesh; a peer with another passphrase, joining through the same
// bootstrap peer, gets neither their gossip nor a place in their view.
func TestPrivateMeshRefusesOutsiders(t *testing.T) {
	const secret = "correct horse battery staple"
	privateMeshRefusesOutsiders(t, []string{"--mesh-secret", secret}, []string{"--mesh-secret", "a different secret, same length"})
}

// TestPrivateMeshKeyFile is TestPrivateMeshRefusesOutsiders with key
// files, the recommended way: members share one key file, the outsider
// holds another.
func TestPrivateMeshKeyFile(t *testing.T) {
	dir := t.TempDir()
	member, outsider := filepath.Join(dir, "mesh.key"), filepath.Join(dir, "other.key")
	for _, p := range []string{member, outsider} {
		if err := writeMeshKeyFile(p); err != nil {
			t.Fatal(err)
		}
	}
	privateMeshRefusesOutsiders(t, []string{"--mesh-key-file", member}, []string{"--mesh-key-file", outsider})
}

// privateMeshRefusesOutsiders starts a bootstrap peer and two members
// with memberArgs, and an outsider with outsiderArgs joining through the
// same bootstrap peer; the members must meet, and the outsider get
// neither their gossip nor a place in their view.
func privateMeshRefusesOutsiders(t *testing.T, memberArgs, outsiderArgs []string) {
	boot := startJoin(t, "boot", append([]string{"--bootstrap-node"}, memberArgs...)...)
	a := startJoin(t, "a", append([]string{"--bootstrap", boot.addr}, memberArgs...)...)
	outsider := startJoin(t, "outsider", append([]string{"--bootstrap", boot.addr}, outsiderArgs...)...)
	b := startJoin(t, "b", append([]string{"--bootstrap", boot.addr}, memberArgs...)...)
	waitFor(t, "A to learn B through the private mesh", 60*time.Second, func() bool { return a.knows(t, b.peerID, false) })
	for _, p := range []*proc{boot, a, b} {
		for _, q := range p.mesh(t).Peers {
			if q.Peer == outsider.peerID {
				t.Fatalf("a member lists the outsider in its mesh view")
			}
		}
	}
	for _, q := range outsider.mesh(t).Peers {
		if q.Load != nil {
			t.Fatalf("the outsider received a member's load announcement: %+v", q)
		}
	}
}
