package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/meshllm/meshllm/"

// rule is one row of the layout table: the packages it covers (a pattern
// for go list) and what their dependencies, tests included, must not be.
type rule struct {
	pattern string
	// stdOnly forbids every non-standard package but the module's allowed
	// ones.
	stdOnly bool
	allowed []string // module packages allowed under stdOnly
	// forbidden are import path prefixes ("x/" matches x and x/...).
	forbidden []string
}

var (
	network = []string{"github.com/libp2p/", "github.com/multiformats/", mod + "p2p"}
	cgo     = []string{mod + "infer/llama", "github.com/ollama/ollama/llama"}
)

func rules() []rule {
	return []rule{
		// cache/: the radix tree, digests and replicas, standard library only.
		{pattern: "./cache/...", stdOnly: true, allowed: []string{mod + "cache"}},
		// infer/: the Engine interface and the pure engines; knows nothing
		// of the mesh. Only infer/llama links llama.cpp.
		{pattern: "./infer", forbidden: concat(network, cgo, []string{mod + "node", mod + "cmd", mod + "testnet"})},
		{pattern: "./infer/sim", forbidden: concat(network, cgo, []string{mod + "node", mod + "cmd", mod + "testnet"})},
		{pattern: "./infer/synth", forbidden: concat(network, cgo, []string{mod + "node", mod + "cmd", mod + "testnet"})},
		{pattern: "./infer/llama", forbidden: concat(network, []string{mod + "node", mod + "cmd", mod + "testnet"})},
		// p2p/: the network, with no idea of routing or engines.
		{pattern: "./p2p/...", forbidden: []string{mod + "node", mod + "infer", mod + "cmd", mod + "testnet", "github.com/ollama/"}},
		// node/: the router; declares the interfaces it consumes and never
		// imports the network, the cgo engine, or the HTTP layers above it.
		{pattern: "./node", forbidden: concat(network, cgo, []string{mod + "node/httpapi", mod + "node/dashboard", mod + "cmd", mod + "testnet"})},
		// node/httpapi: the OpenAI and Ollama APIs over a Generator; the
		// router satisfies it, so the API does not import the router (the
		// router package itself: "$" marks an exact path).
		{pattern: "./node/httpapi", forbidden: concat(network, cgo, []string{mod + "node$", mod + "node/dashboard", mod + "cmd", mod + "testnet"})},
		// node/forward: the forward policy both the router and the API
		// read; a leaf.
		{pattern: "./node/forward", stdOnly: true, allowed: []string{mod + "node/forward"}},
		// node/dashboard: the live page over the router's status.
		{pattern: "./node/dashboard", forbidden: concat(network, cgo, []string{mod + "cmd", mod + "testnet"})},
	}
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// TestLayout checks every row: go list -deps -test of the row's packages
// must not reach what the row forbids.
func TestLayout(t *testing.T) {
	for _, r := range rules() {
		t.Run(strings.Trim(r.pattern, "./"), func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-test", r.pattern)
			cmd.Dir = "../.."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", r.pattern, err, out)
			}
			var pkgs []string
			for line := range strings.Lines(string(out)) {
				if f := strings.Fields(line); len(f) > 0 {
					pkgs = append(pkgs, strings.TrimSuffix(f[0], ".test"))
				}
			}
			if len(pkgs) < 5 {
				t.Fatalf("go list listed %d packages: %q", len(pkgs), out)
			}
			for _, p := range pkgs {
				if why := r.violation(p); why != "" {
					t.Errorf("%s depends on %s (%s)", r.pattern, p, why)
				}
			}
		})
	}
}

func (r rule) violation(pkg string) string {
	for _, bad := range r.forbidden {
		if matches(pkg, bad) && !r.self(pkg) {
			return "forbidden: " + bad
		}
	}
	if r.stdOnly && !isStd(pkg) {
		for _, ok := range r.allowed {
			if matches(pkg, ok+"/") {
				return ""
			}
		}
		return "standard library only"
	}
	return ""
}

// self reports whether pkg is one of the row's own packages (a row that
// forbids a prefix may still be under it: infer/llama under infer).
func (r rule) self(pkg string) bool {
	own := mod + strings.TrimSuffix(strings.TrimPrefix(r.pattern, "./"), "/...")
	return pkg == own || (strings.HasSuffix(r.pattern, "/...") && strings.HasPrefix(pkg, own+"/"))
}

// matches treats a prefix ending in "$" as that exact package, and any
// other prefix (with or without a trailing "/") as the package and its
// subpackages.
func matches(pkg, prefix string) bool {
	if exact, ok := strings.CutSuffix(prefix, "$"); ok {
		return pkg == exact
	}
	p := strings.TrimSuffix(prefix, "/")
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

func isStd(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// TestRulesCatch: the rules flag what they are meant to (a rule that
// matched nothing would pass silently).
func TestRulesCatch(t *testing.T) {
	byPattern := map[string]rule{}
	for _, r := range rules() {
		byPattern[r.pattern] = r
	}
	for _, c := range []struct{ pattern, pkg string }{
		{"./cache/...", "github.com/prometheus/client_golang/prometheus"},
		{"./cache/...", mod + "infer"},
		{"./node", "github.com/libp2p/go-libp2p/core/host"},
		{"./node", mod + "p2p"},
		{"./node", mod + "node/httpapi"},
		{"./node/httpapi", mod + "node"},
		{"./node/httpapi", "github.com/ollama/ollama/llama"},
		{"./node/dashboard", mod + "infer/llama"},
		{"./infer", mod + "node"},
		{"./p2p/...", mod + "infer"},
	} {
		if byPattern[c.pattern].violation(c.pkg) == "" {
			t.Errorf("%s may import %s: the rule misses it", c.pattern, c.pkg)
		}
	}
	for _, c := range []struct{ pattern, pkg string }{
		{"./cache/...", "strings"},
		{"./cache/...", mod + "cache"},
		{"./node/httpapi", mod + "infer"},
		{"./node/httpapi", mod + "node/forward"},
		{"./node/dashboard", mod + "node"},
		{"./infer/llama", "github.com/ollama/ollama/llama"},
	} {
		if why := byPattern[c.pattern].violation(c.pkg); why != "" {
			t.Errorf("%s may not import %s (%s): the rule is too strict", c.pattern, c.pkg, why)
		}
	}
}
