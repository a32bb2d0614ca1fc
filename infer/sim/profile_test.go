package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPresetsValid(t *testing.T) {
	for _, p := range Presets() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.Description == "" {
			t.Errorf("%s: no description", p.Name)
		}
		if got, ok := Preset(p.Name); !ok || got.Name != p.Name {
			t.Errorf("Preset(%q) not found", p.Name)
		}
	}
	if _, ok := Preset("nope"); ok {
		t.Error("unknown preset found")
	}
}

func TestProfileSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	want := Presets()[0]
	if err := want.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadProfile(path)
	if err != nil || got != want {
		t.Fatalf("roundtrip: %+v %v", got, err)
	}
	b, _ := os.ReadFile(path)
	for _, field := range []string{`"prefill_token_s": 0.01`, `"decode_token_s": 0.125`, `"slots": 4`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("saved JSON lacks %s:\n%s", field, b)
		}
	}
	if p, err := LoadProfile("tiny"); err != nil || p.Name != "tiny" {
		t.Errorf("preset by name: %v", err)
	}
	if _, err := LoadProfile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}

func TestParseProfileErrors(t *testing.T) {
	for name, js := range map[string]string{
		"unknown field": `{"name":"x","context_length":100,"vocab_size":100,"slots":1,"prefill_tokn_s":1}`,
		"no name":       `{"context_length":100,"vocab_size":100,"slots":1}`,
		"no slots":      `{"name":"x","context_length":100,"vocab_size":100}`,
		"negative cost": `{"name":"x","context_length":100,"vocab_size":100,"slots":1,"decode_token_s":-1}`,
		"small cache":   `{"name":"x","context_length":100,"vocab_size":100,"slots":1,"cache_cells":50}`,
		"not json":      `{`,
	} {
		if _, err := ParseProfile([]byte(js)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p, err := ParseProfile([]byte(`{"name":"x","context_length":100,"vocab_size":100,"slots":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.WithDefaults(); d.Parallel != 1 || d.CacheCells != 200 || d.QueueLimit != 8 || d.BatchTokens != 512 {
		t.Errorf("defaults %+v", d)
	}
}

func TestCostModel(t *testing.T) {
	p := Profile{PrefillBase: 0.1, PrefillToken: 0.01, PrefillAttention: 0.001, DecodeToken: 0.05, DecodeAttention: 0.0001}
	// 10 tokens after 5 cached: 0.1 + 10*0.01 + 0.001*(10*5 + 45) = 0.295 s.
	if got := p.PrefillTime(10, 5); got != 295*time.Millisecond {
		t.Errorf("PrefillTime = %v", got)
	}
	if got := p.PrefillTime(0, 5); got != 0 {
		t.Errorf("nothing to prefill costs %v", got)
	}
	// Chunks add up to the whole.
	if a, b := p.prefillChunk(4, 5)+p.prefillChunk(6, 9), p.prefillChunk(10, 5); a != b {
		t.Errorf("chunks %v != whole %v", a, b)
	}
	if got := p.DecodeTime(100); got != 60*time.Millisecond {
		t.Errorf("DecodeTime = %v", got)
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"name":"x","context_length":100,"vocab_size":100,"slots":2}`))
	f.Add([]byte(`{"name":"x","context_length":100,"vocab_size":100,"slots":2,"prefill_token_s":1e308}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProfile(b)
		if err != nil {
			return
		}
		if _, err := New(p); err != nil {
			t.Fatalf("valid profile rejected by New: %v", err)
		}
		_ = p.PrefillTime(p.ContextLength, 0)
	})
}
