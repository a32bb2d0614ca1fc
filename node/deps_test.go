package node

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps node free of the network stack (DESIGN.md, "Layout"): it
// declares the interfaces it consumes (Forwarder, Announcer, RTTSource) and
// the p2p package implements them, so node must never import libp2p or
// p2p/, nor the cgo engine (infer/llama) — not even from its tests.
func TestDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/meshllm/meshllm/node").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/libp2p/",
		"github.com/multiformats/",
		"github.com/meshllm/meshllm/p2p",
		"github.com/meshllm/meshllm/infer/llama",
		"github.com/ollama/ollama/llama",
	}
	n := 0
	for _, pkg := range strings.Fields(string(out)) {
		n++
		for _, bad := range forbidden {
			if pkg == strings.TrimSuffix(bad, "/") || strings.HasPrefix(pkg, bad) {
				t.Errorf("node depends on %s", pkg)
			}
		}
	}
	if n < 10 {
		t.Fatalf("go list listed %d packages: %q", n, out)
	}
}
