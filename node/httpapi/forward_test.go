package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/node/forward"
)

// policyGen is a Generator that records the forward policy each request's
// context carries when it reaches Generate: what the router would see.
type policyGen struct {
	*fakeEngine
	mu  sync.Mutex
	got []forward.Policy
}

func (g *policyGen) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	g.mu.Lock()
	g.got = append(g.got, forward.FromContext(ctx))
	g.mu.Unlock()
	return g.fakeEngine.Generate(ctx, req, emit)
}

func (g *policyGen) take() []forward.Policy {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.got
	g.got = nil
	return out
}

func newPolicyServer(t *testing.T) (*policyGen, string) {
	t.Helper()
	g := &policyGen{fakeEngine: newFakeEngine()}
	srv, err := NewServer(DefaultConfig(), g)
	if err != nil {
		t.Fatal(err)
	}
	return g, httptestServer(t, srv.Handler())
}

// generationEndpoints are the endpoints that generate, with a body taking
// extra fields at %s, in both dialects.
var generationEndpoints = []struct {
	path, body string
	ollama     bool
}{
	{"/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}]%s}`, false},
	{"/v1/completions", `{"model":"stories260K","prompt":"hi"%s}`, false},
	{"/v1/responses", `{"model":"stories260K","input":"hi"%s}`, false},
	{"/api/generate", `{"model":"stories260K","prompt":"hi","stream":false%s}`, true},
	{"/api/chat", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"stream":false%s}`, true},
}

// TestForwardOverrideReachesRouter: the X-Meshllm-Forward header and the
// "meshllm": {"forward": ...} body field reach the Generator on the
// request's context, on every generating endpoint; given both, the
// narrower applies.
func TestForwardOverrideReachesRouter(t *testing.T) {
	g, url := newPolicyServer(t)
	cases := []struct {
		name, header, field string
		want                forward.Policy
	}{
		{"nothing", "", "", forward.Unset},
		{"header none", "none", "", forward.None},
		{"header members", "Members", "", forward.Members},
		{"body none", "", `,"meshllm":{"forward":"none"}`, forward.None},
		{"body members", "", `,"meshllm":{"forward":"members"}`, forward.Members},
		{"body any", "", `,"meshllm":{"forward":"any"}`, forward.Any},
		{"body null", "", `,"meshllm":null`, forward.Unset},
		{"body empty", "", `,"meshllm":{}`, forward.Unset},
		{"header any, body none", "any", `,"meshllm":{"forward":"none"}`, forward.None},
		{"header members, body any", "members", `,"meshllm":{"forward":"any"}`, forward.Members},
	}
	for _, ep := range generationEndpoints {
		for _, c := range cases {
			t.Run(ep.path+"/"+c.name, func(t *testing.T) {
				var hdr []string
				if c.header != "" {
					hdr = []string{ForwardHeader, c.header}
				}
				status, _, body := post(t, url, ep.path, fmt.Sprintf(ep.body, c.field), hdr...)
				if status != 200 {
					t.Fatalf("status %d: %s", status, body)
				}
				if got := g.take(); len(got) != 1 || got[0] != c.want {
					t.Fatalf("generator saw %v, want [%v]", got, c.want)
				}
			})
		}
	}
}

// TestForwardOverrideBadValues: a bad header value or body field is a
// 400 naming it, in the dialect of the endpoint, and nothing is generated
// (a typo must not silently let a prompt go where the user said no).
func TestForwardOverrideBadValues(t *testing.T) {
	g, url := newPolicyServer(t)
	cases := []struct {
		name, header, field, param string
	}{
		{"header value", "everyone", "", ForwardHeader},
		{"header empty", " ", "", ForwardHeader},
		{"header list", "none, any", "", ForwardHeader},
		{"body value", "", `,"meshllm":{"forward":"all"}`, "meshllm.forward"},
		{"body empty", "", `,"meshllm":{"forward":""}`, "meshllm.forward"},
		{"body type", "", `,"meshllm":{"forward":3}`, "meshllm.forward"},
		{"body typo", "", `,"meshllm":{"forwrd":"none"}`, "meshllm.forwrd"},
		{"body not an object", "", `,"meshllm":"none"`, "meshllm"},
	}
	for _, ep := range generationEndpoints {
		for _, c := range cases {
			t.Run(ep.path+"/"+c.name, func(t *testing.T) {
				var hdr []string
				if c.header != "" {
					hdr = []string{ForwardHeader, c.header}
				}
				status, _, body := post(t, url, ep.path, fmt.Sprintf(ep.body, c.field), hdr...)
				if status != 400 {
					t.Fatalf("status %d, want 400: %s", status, body)
				}
				if ep.ollama {
					var e ollamaError
					mustJSON(t, body, &e)
					if !strings.Contains(e.Error, c.param) {
						t.Fatalf("error %q does not name %s", e.Error, c.param)
					}
				} else {
					var e openAIErrorEnvelope
					mustJSON(t, body, &e)
					if e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.param) {
						t.Fatalf("error %+v does not name %s", e.Error, c.param)
					}
				}
				if got := g.take(); len(got) != 0 {
					t.Fatalf("generated despite the 400: %v", got)
				}
			})
		}
	}
}

// TestForwardFieldShape: the body field decodes to the documented shape
// (what docs/api.md shows).
func TestForwardFieldShape(t *testing.T) {
	var f meshllmField
	if err := json.Unmarshal([]byte(`{"meshllm":{"forward":"members"}}`), &f); err != nil || f.Meshllm == nil || f.Meshllm.Forward != forward.Members {
		t.Fatalf("%+v %v", f.Meshllm, err)
	}
}
