package infer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseModelRef(t *testing.T) {
	tests := []struct {
		in   string
		want ModelRef
		str  string
	}{
		{"qwen2.5:0.5b", ModelRef{DefaultRegistry, DefaultNamespace, "qwen2.5", "0.5b"}, "qwen2.5:0.5b"},
		{"llama3.2", ModelRef{DefaultRegistry, DefaultNamespace, "llama3.2", "latest"}, "llama3.2"},
		{"user/model", ModelRef{DefaultRegistry, "user", "model", "latest"}, "user/model"},
		{"user/model:q4", ModelRef{DefaultRegistry, "user", "model", "q4"}, "user/model:q4"},
		{"hf.co/ns/model:tag", ModelRef{"hf.co", "ns", "model", "tag"}, "hf.co/ns/model:tag"},
		{"localhost:5000/ns/m", ModelRef{"localhost:5000", "ns", "m", "latest"}, "localhost:5000/ns/m"},
	}
	for _, tt := range tests {
		got, err := ParseModelRef(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseModelRef(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if got.String() != tt.str {
			t.Errorf("%q: String() = %q, want %q", tt.in, got.String(), tt.str)
		}
	}
	for _, bad := range []string{"", "a/b/c/d", "m:", ":tag", "/m", "../../etc/passwd", "a b", "ns/.", `a\b`} {
		if _, err := ParseModelRef(bad); !errors.Is(err, ErrUnknownModel) {
			t.Errorf("ParseModelRef(%q): err = %v, want ErrUnknownModel", bad, err)
		}
	}
}

const (
	digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// fakeStore lays out an Ollama store: qwen2.5:0.5b and user/tiny (latest)
// with blobs, hf.co/x/broken whose blob is missing, and a manifest without
// a model layer.
func fakeStore(t *testing.T) Store {
	t.Helper()
	dir := t.TempDir()
	put := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest := func(digest string) string {
		return `{"schemaVersion":2,"config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:` + digestB + `"},
"layers":[{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:` + digestB + `","size":3},
{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + digest + `","size":5}]}`
	}
	put("manifests/registry.ollama.ai/library/qwen2.5/0.5b", manifest(digestA))
	put("manifests/registry.ollama.ai/user/tiny/latest", manifest(digestB))
	put("manifests/hf.co/x/broken/latest", manifest("cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"))
	put("manifests/registry.ollama.ai/library/nomodel/latest", `{"layers":[]}`)
	put("blobs/sha256-"+digestA, "GGUFa")
	put("blobs/sha256-"+digestB, "GGUFb")
	return Store{Dir: dir}
}

func TestStoreLookup(t *testing.T) {
	s := fakeStore(t)
	m, err := s.Lookup("qwen2.5:0.5b")
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != filepath.Join(s.Dir, "blobs", "sha256-"+digestA) || m.Name != "qwen2.5:0.5b" || m.Size != 5 || m.Digest != "sha256:"+digestA {
		t.Errorf("lookup: %+v", m)
	}
	if m, err := s.Lookup("registry.ollama.ai/user/tiny:latest"); err != nil || m.Name != "user/tiny" {
		t.Errorf("full name: %+v %v", m, err)
	}
	for _, name := range []string{"qwen2.5", "missing:7b", "hf.co/x/broken", "nomodel"} {
		_, err := s.Lookup(name)
		if !errors.Is(err, ErrUnknownModel) {
			t.Errorf("%s: err = %v, want ErrUnknownModel", name, err)
			continue
		}
		for _, want := range []string{"--model PATH", s.Dir, name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", name, err, want)
			}
		}
	}
}

func TestStoreList(t *testing.T) {
	got, err := fakeStore(t).List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "qwen2.5:0.5b,user/tiny" {
		t.Errorf("list: %v", names)
	}
	empty, err := Store{Dir: filepath.Join(t.TempDir(), "none")}.List()
	if err != nil || len(empty) != 0 {
		t.Errorf("missing store: %v, %v", empty, err)
	}
}

func TestResolveModel(t *testing.T) {
	s := fakeStore(t)
	file := filepath.Join(t.TempDir(), "stories.gguf")
	if err := os.WriteFile(file, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ResolveModel(file, s)
	if err != nil || r != (ResolvedModel{Name: "stories", Path: file}) {
		t.Errorf("file: %+v %v", r, err)
	}
	r, err = ResolveModel("qwen2.5:0.5b", s)
	if err != nil || !r.Store || r.Name != "qwen2.5:0.5b" || filepath.Base(r.Path) != "sha256-"+digestA {
		t.Errorf("store: %+v %v", r, err)
	}
	for _, ref := range []string{"", "/no/such/model.gguf", "./x.gguf", "missing.gguf", "unknown:1b", filepath.Dir(file)} {
		_, err := ResolveModel(ref, s)
		if !errors.Is(err, ErrUnknownModel) || !strings.Contains(err.Error(), "--model PATH") || !strings.Contains(err.Error(), s.Dir) {
			t.Errorf("%q: err = %v", ref, err)
		}
	}
}

func TestDefaultStore(t *testing.T) {
	t.Setenv("OLLAMA_MODELS", "/srv/ollama")
	if d := DefaultStore().Dir; d != "/srv/ollama" {
		t.Errorf("OLLAMA_MODELS ignored: %s", d)
	}
	t.Setenv("OLLAMA_MODELS", "")
	t.Setenv("HOME", "/home/u")
	if d := DefaultStore().Dir; d != "/home/u/.ollama/models" {
		t.Errorf("default: %s", d)
	}
}
