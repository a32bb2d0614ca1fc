package workload

import (
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/testnet/mmlu"
)

var loadSet = sync.OnceValues(func() (*mmlu.Set, error) {
	return mmlu.Load(filepath.Join("..", "..", mmlu.DefaultDir))
})

func mmluSet(t testing.TB) *mmlu.Set {
	t.Helper()
	s, err := loadSet()
	if err != nil {
		t.Skipf("MMLU data not available: %v", err)
	}
	return s
}

func TestMMLUDeterministicPerSeed(t *testing.T) {
	set := mmluSet(t)
	cfg := MMLUConfig{Set: set, Requests: 300, Skew: Skew{Zipf: true, S: 1.1}, Peers: 4, Arrivals: Arrivals{Rate: 5}, Seed: 7}
	a, err := MMLU(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := MMLU(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different workloads")
	}
	cfg.Seed = 8
	c, _ := MMLU(cfg)
	if reflect.DeepEqual(a.Requests, c.Requests) {
		t.Fatal("different seeds, same requests")
	}
	// Every prompt of a subject starts with the subject's tokenized prefix.
	bySubject := map[string][]int32{}
	for _, r := range a.Requests {
		p, ok := bySubject[r.Group]
		if !ok {
			bySubject[r.Group] = r.Prompt
			continue
		}
		n := 0
		for n < len(p) && n < len(r.Prompt) && p[n] == r.Prompt[n] {
			n++
		}
		if n < len(r.Prompt)/2 {
			t.Fatalf("%s: prompts share only %d of %d tokens", r.Group, n, len(r.Prompt))
		}
	}
}

func TestZipfSkewConcentrates(t *testing.T) {
	set := mmluSet(t)
	count := func(k Skew) int {
		w, err := MMLU(MMLUConfig{Set: set, Requests: 2000, Skew: k, Peers: 1, Arrivals: Arrivals{Rate: 1}, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, r := range w.Requests {
			n[r.Group]++
		}
		top := 0
		for _, v := range n {
			top = max(top, v)
		}
		return top
	}
	uni, zipf := count(Uniform), count(Skew{Zipf: true, S: 1.1})
	// Uniform over 57: about 35 each; Zipf(1.1) over 57: the top subject
	// takes about 1/H(57,1.1) ~ 24%.
	if uni > 80 || zipf < 300 {
		t.Fatalf("top subject: uniform %d, zipf %d", uni, zipf)
	}
}

func TestPoissonArrivals(t *testing.T) {
	w, err := SharedPrefix(SharedPrefixConfig{Requests: 4000, Peers: 3, Arrivals: Arrivals{Rate: 20}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	last := w.Sessions[len(w.Sessions)-1].Start
	rate := float64(len(w.Sessions)) / last.Seconds()
	if rate < 18 || rate > 22 {
		t.Fatalf("rate %.1f/s, want about 20", rate)
	}
	entries := make([]int, 3)
	for i, s := range w.Sessions {
		if i > 0 && s.Start < w.Sessions[i-1].Start {
			t.Fatal("start times not sorted")
		}
		entries[s.Entry]++
	}
	for _, n := range entries {
		if n < 1200 || n > 1470 {
			t.Fatalf("entries per peer %v, want about 1333 each", entries)
		}
	}
	// Each prompt is its group's system prompt plus a question.
	for _, r := range w.Requests[:50] {
		if len(r.Prompt) != 1+1024+128 || len(r.Reply) != 16 {
			t.Fatalf("prompt %d reply %d tokens", len(r.Prompt), len(r.Reply))
		}
	}
}

func TestChatHistoriesGrow(t *testing.T) {
	cfg := ChatConfig{Requests: 200, Peers: 2, Arrivals: Arrivals{Clients: 4, Think: time.Second}, Away: 0.2, Seed: 11}
	w, err := Chat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := Chat(cfg)
	if !reflect.DeepEqual(w, w2) {
		t.Fatal("chat not deterministic")
	}
	if len(w.Requests) != 200 {
		t.Fatalf("%d requests", len(w.Requests))
	}
	for _, s := range w.Sessions {
		if s.Client < 0 || s.Client >= 4 {
			t.Fatalf("client %d", s.Client)
		}
		for k := 1; k < len(s.Requests); k++ {
			prev, cur := w.Requests[s.Requests[k-1]], w.Requests[s.Requests[k]]
			hist := append(slices.Clone(prev.Prompt), prev.Reply...)
			if !slices.Equal(cur.Prompt[:len(hist)], hist) {
				t.Fatal("turn does not extend the history")
			}
			if cur.Think <= 0 || cur.Turn != k {
				t.Fatalf("turn %d think %v", cur.Turn, cur.Think)
			}
		}
	}
}

func TestParseSkew(t *testing.T) {
	for in, want := range map[string]Skew{"uniform": {}, "": {}, "zipf": {true, 1.1}, "zipf:0.8": {true, 0.8}} {
		got, err := ParseSkew(in)
		if err != nil || got != want {
			t.Errorf("ParseSkew(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"zipf:-1", "zipf:x", "pareto"} {
		if _, err := ParseSkew(bad); err == nil {
			t.Errorf("ParseSkew(%q) accepted", bad)
		}
	}
	if s := (Skew{true, 1.1}).String(); s != "zipf:1.1" {
		t.Fatal(s)
	}
}

func BenchmarkMMLU(b *testing.B) {
	set := mmluSet(b)
	for b.Loop() {
		if _, err := MMLU(MMLUConfig{Set: set, Requests: 1000, Skew: Uniform, Peers: 4, Arrivals: Arrivals{Rate: 5}}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMMLUPromptLengths(t *testing.T) {
	set := mmluSet(t)
	w, err := MMLU(MMLUConfig{Set: set, Requests: 2000, Peers: 1, Arrivals: Arrivals{Rate: 1}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("mean prompt %.0f tokens", st.MeanPrompt)
	if st.MeanPrompt < 200 || st.MeanPrompt > 3000 {
		t.Fatalf("mean prompt %.0f tokens", st.MeanPrompt)
	}
}
