package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/node/forward"
	"github.com/meshllm/meshllm/p2p"
)

// TestForwardFlag: --forward (or MESHLLM_FORWARD) sets where the peer's
// own requests may go; a private mesh defaults to members, an open one to
// any, with a warning; join's line says what the setting means; the
// digests are keyed by a subkey of the mesh key when there is one.
func TestForwardFlag(t *testing.T) {
	key := make([]byte, p2p.MeshKeyLen)
	rand.Read(key)
	keyFile := writeFile(t, "mesh.key", hex.EncodeToString(key)+"\n", 0o600)
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	cases := []struct {
		name   string
		env    string
		args   []string
		want   forward.Policy
		keyed  bool
		says   string // in the printed lines
		warned bool   // the open-mesh warning
	}{
		{"open mesh", "", nil, forward.Any, false, "forward: any — this peer's requests may be served by any peer of the mesh", true},
		{"key file", "", []string{"--mesh-key-file", keyFile}, forward.Members, true, "forward: members — this peer's requests may be served by proven members of the private mesh only", false},
		{"allowlist", "", []string{"--allow-peer", id.String()}, forward.Members, false, "proven members of the private mesh only", false},
		{"none", "", []string{"--mesh-key-file", keyFile, "--forward", "none"}, forward.None, true, "forward: none — this peer's requests are served here only", false},
		{"env", "none", nil, forward.None, false, "forward: none", false},
		{"any in a private mesh", "", []string{"--mesh-key-file", keyFile, "--forward", "any"}, forward.Any, true, "forward: any", false},
		{"members in an open mesh", "", []string{"--forward", "members"}, forward.Members, false, "this mesh is open", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("MESHLLM_FORWARD", c.env)
			}
			acc, _, _, err := runAccess(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if acc.forward != c.want {
				t.Fatalf("forward %v, want %v", acc.forward, c.want)
			}
			if hk := acc.hashKey(); (hk != nil) != c.keyed || (c.keyed && !bytes.Equal(hk, p2p.MeshSubkey(key, blockHashPurpose))) {
				t.Fatalf("hash key %x (keyed %v)", hk, c.keyed)
			}
			var out bytes.Buffer
			printForward(&out, acc)
			if !strings.Contains(out.String(), c.says) || strings.Contains(out.String(), "prompts may be served by strangers") != c.warned {
				t.Fatalf("printed %q, want %q (warning %v)", out.String(), c.says, c.warned)
			}
		})
	}
	t.Run("bad value", func(t *testing.T) {
		_, _, _, err := runAccess(t, "--forward", "everyone")
		if err == nil || !strings.Contains(err.Error(), "--forward") || !strings.Contains(err.Error(), "everyone") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestPrivateMeshForwardsToMembers: in a private mesh (one key file) the
// peers' keyed digests still match each other's, so the same-prefix
// request sent to one member is forwarded to the member holding it (the
// members default); the same request with X-Meshllm-Forward: none stays
// on the entry peer. join says where requests may go.
func TestPrivateMeshForwardsToMembers(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "mesh.key")
	if err := writeMeshKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	boot := startJoin(t, "boot", "--bootstrap-node", "--mesh-key-file", keyFile)
	a := startJoin(t, "a", "--bootstrap", boot.addr, "--mesh-key-file", keyFile)
	b := startJoin(t, "b", "--bootstrap", boot.addr, "--mesh-key-file", keyFile)
	waitFor(t, "A to learn B through the private mesh", 60*time.Second, func() bool { return a.knows(t, b.peerID, false) })
	holder, entry := warmPrefix(t, boot, a, b)
	ask := func(policy string) float64 {
		body := fmt.Sprintf(`{"model":"stories260K","prompt":%q,"max_tokens":4,"temperature":0}`, fiveShot(t, 1))
		req, _ := http.NewRequest(http.MethodPost, "http://"+entry.http+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if policy != "" {
			req.Header.Set("X-Meshllm-Forward", policy)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return entry.metric(t, `meshllm_router_served_total{where="peer"}`)
	}
	if got := ask(""); got != 1 {
		t.Fatalf("the entry peer forwarded %v requests to members, want 1 (keyed digests must match)", got)
	}
	if got := holder.metric(t, `meshllm_router_forwarded_in_total`); got < 1 {
		t.Fatalf("the holder served %v forwarded requests", got)
	}
	if got := ask("none"); got != 1 {
		t.Fatalf("with X-Meshllm-Forward: none the entry peer forwarded again (%v in all)", got)
	}
	const line = "forward: members — this peer's requests may be served by proven members of the private mesh only"
	waitFor(t, "join to print the forward setting", 10*time.Second, func() bool {
		lw := entry.cmd.Stderr.(*lockedWriter)
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return strings.Contains(lw.w.String(), line)
	})
}
