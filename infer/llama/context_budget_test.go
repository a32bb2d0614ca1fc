package llama

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/infer/synth"
)

func TestPlanContext(t *testing.T) {
	const kib = 1 << 10
	cases := []struct {
		name      string
		in        planInput
		ctx       int
		cells     int
		cappedHas string // "" means not capped
	}{
		{"fits: trained context for every slot",
			planInput{trained: 32768, slots: 4, bytesPerCell: 12 * kib, budget: 9 << 30}, 32768, 4 * 32768, ""},
		{"budget caps the cells, not the context",
			planInput{trained: 32768, slots: 4, bytesPerCell: 12 * kib, budget: 1 << 30}, 32768, 87296, "budget"},
		{"budget caps the context",
			planInput{trained: 131072, slots: 4, bytesPerCell: 32 * kib, budget: 256 << 20}, 8192, 8192, "budget"},
		{"budget below the floor keeps 2048",
			planInput{trained: 131072, slots: 4, bytesPerCell: 32 * kib, budget: 1 << 20}, 2048, 2048, "floor"},
		{"floor never above the trained context",
			planInput{trained: 1024, slots: 2, bytesPerCell: 1 << 20, budget: 0}, 1024, 1024, "floor"},
		{"explicit context wins over the budget",
			planInput{trained: 131072, slots: 4, contextLength: 65536, bytesPerCell: 32 * kib, budget: 256 << 20}, 65536, 65536, "Config.ContextLength"},
		{"explicit context bounded by trained",
			planInput{trained: 4096, slots: 2, contextLength: 10000, bytesPerCell: 1, budget: 1 << 30}, 4096, 8192, ""},
		{"explicit context below trained",
			planInput{trained: 4096, slots: 2, contextLength: 256, bytesPerCell: 1, budget: 1 << 30}, 256, 512, "Config.ContextLength"},
		{"explicit cells: context follows",
			planInput{trained: 4096, slots: 4, kvCells: 3000, bytesPerCell: 1, budget: 1}, 3000, 3000, "Config.KVCells"},
		{"explicit cells bounded by slots × trained",
			planInput{trained: 4096, slots: 2, kvCells: 1 << 20, bytesPerCell: 1, budget: 1}, 4096, 8192, ""},
		{"both explicit: cells raised to the context",
			planInput{trained: 4096, slots: 2, contextLength: 2000, kvCells: 1000, bytesPerCell: 1, budget: 1}, 2000, 2000, "Config.KVCells"},
		{"unknown trained context: 2048",
			planInput{trained: 0, slots: 4, bytesPerCell: 1, budget: 1 << 40}, 2048, 8192, ""},
		{"no per-token cost: no cap, bounded cells",
			planInput{trained: 1 << 24, slots: 4, bytesPerCell: 0, budget: 0}, maxKVCells, maxKVCells, "cell bound"},
		{"zero slots count as one",
			planInput{trained: 512, slots: 0, bytesPerCell: 64, budget: 1 << 30}, 512, 512, ""},
	}
	for _, c := range cases {
		p := planContext(c.in)
		if p.ContextLength != c.ctx || p.KVCells != c.cells {
			t.Errorf("%s: context %d cells %d, want %d %d (%s)", c.name, p.ContextLength, p.KVCells, c.ctx, c.cells, p)
		}
		if (c.cappedHas == "") != (p.Capped == "") || !strings.Contains(p.Capped, c.cappedHas) {
			t.Errorf("%s: capped %q, want one mentioning %q", c.name, p.Capped, c.cappedHas)
		}
		if p.ContextLength > p.KVCells || p.KVCells > maxKVCells {
			t.Errorf("%s: context %d > cells %d or cells past the bound", c.name, p.ContextLength, p.KVCells)
		}
		padded := int64((p.KVCells + 255) / 256 * 256)
		if p.KVBytes != padded*c.in.bytesPerCell {
			t.Errorf("%s: KV bytes %d, want %d", c.name, p.KVBytes, padded*c.in.bytesPerCell)
		}
		if p.Capped == "the KV memory budget" && p.KVBytes > c.in.budget {
			t.Errorf("%s: budget-capped plan takes %d bytes, budget %d", c.name, p.KVBytes, c.in.budget)
		}
	}
}

func TestKVBytesPerCell(t *testing.T) {
	stories := infer.ModelMeta{BlockCount: 5, HeadCountKV: 4, KeyLength: 8, ValueLength: 8}
	qwen7b := infer.ModelMeta{BlockCount: 28, HeadCountKV: 4, KeyLength: 128, ValueLength: 128}
	deepseek := infer.ModelMeta{BlockCount: 27, HeadCountKV: 16, KeyLength: 192, ValueLength: 128, KVLoraRank: 512, RopeDimensions: 64}
	cases := []struct {
		name string
		m    infer.ModelMeta
		kv   string
		want int64
	}{
		{"stories f16", stories, "f16", 5 * 4 * 16 * 2},
		{"qwen2.5-7b f16: 56 KiB a token", qwen7b, "f16", 56 << 10},
		{"qwen2.5-7b q8_0", qwen7b, "q8_0", 28 * 4 * 256 * 34 / 32},
		{"qwen2.5-7b q4_0", qwen7b, "Q4_0", 28 * 4 * 256 * 18 / 32},
		{"unknown type is f16", qwen7b, "bogus", 56 << 10},
		{"latent attention", deepseek, "f16", 27 * 576 * 2},
		{"recurrent: no heads", infer.ModelMeta{BlockCount: 24}, "f16", 0},
	}
	for _, c := range cases {
		if got := kvBytesPerCell(c.m, c.kv); got != c.want {
			t.Errorf("%s: %d bytes a cell, want %d", c.name, got, c.want)
		}
	}
}

func TestDefaultKVBudget(t *testing.T) {
	if b, src := defaultKVBudget(16<<30, true, 4<<30); b != 8<<30 || !strings.Contains(src, "16 GiB") {
		t.Errorf("16 GiB available, 4 GiB model: %d (%s)", b, src)
	}
	if b, _ := defaultKVBudget(4<<30, true, 8<<30); b != 0 {
		t.Errorf("model larger than the budget: %d, want 0", b)
	}
	if b, src := defaultKVBudget(0, false, 1<<30); b != fallbackBudget || !strings.Contains(src, "fallback") {
		t.Errorf("unknown memory: %d (%s)", b, src)
	}
}

func TestParseMemInfo(t *testing.T) {
	mi := []byte("MemTotal:       32768000 kB\nMemFree:  100 kB\nMemAvailable:   23951032 kB\nBuffers: 1 kB\n")
	if n, ok := parseMemAvailable(mi); !ok || n != 23951032<<10 {
		t.Errorf("MemAvailable: %d %v", n, ok)
	}
	for _, bad := range []string{"MemTotal: 1 kB\n", "MemAvailable: x kB\n", "MemAvailable: 12 MB\n", "MemAvailable: -5 kB\n"} {
		if _, ok := parseMemAvailable([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	if n, ok := cgroupRemaining([]byte("1073741824\n"), []byte("73741824\n")); !ok || n != 1000000000 {
		t.Errorf("cgroup remaining %d %v", n, ok)
	}
	if _, ok := cgroupRemaining([]byte("max\n"), []byte("5\n")); ok {
		t.Error(`"max" is no limit`)
	}
	if n, ok := cgroupRemaining([]byte("10"), []byte("20")); !ok || n != 0 {
		t.Errorf("over the limit: %d %v", n, ok)
	}
	if n, ok := availableMemory(); ok && n <= 0 {
		t.Errorf("availableMemory %d", n)
	}
}

func TestFormatBytesAndPlanString(t *testing.T) {
	for n, want := range map[int64]string{512: "512 B", 12 << 10: "12 KiB", 384 << 20: "384 MiB", 9771050598: "9.1 GiB", 1536 << 20: "1.5 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	p := planContext(planInput{trained: 32768, slots: 1, bytesPerCell: 12 << 10, budget: 9771050598, budgetSource: "Config.KVBudget"})
	want := "context 32768 of 32768 trained; KV cache 32768 cells for 1 slot, 384 MiB (12 KiB a token) within a budget of 9.1 GiB (Config.KVBudget)"
	if s := p.String(); s != want {
		t.Errorf("String:\n got %s\nwant %s", s, want)
	}
	capped := planContext(planInput{trained: 131072, slots: 4, bytesPerCell: 32 << 10, budget: 256 << 20})
	if s := capped.String(); !strings.Contains(s, "context 8192 of 131072 trained (capped: the KV memory budget)") {
		t.Errorf("capped String: %s", s)
	}
}

// TestLoadCapsContextByBudget loads a synthetic model trained for 1M
// tokens: the default plan is capped by the budget, and the engine serves
// what the plan says.
func TestLoadCapsContextByBudget(t *testing.T) {
	shape, err := synth.LookupShape("tiny")
	if err != nil {
		t.Fatal(err)
	}
	shape.Context = 1 << 20
	path := filepath.Join(t.TempDir(), "tiny-1m.gguf")
	if err := synth.WriteFile(path, shape, synth.Options{Type: synth.F16, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	meta, err := infer.ReadModelMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	perCell := kvBytesPerCell(meta, "f16") // 2 layers × 2 KV heads × (16 + 16) × 2 bytes
	if perCell != 256 {
		t.Fatalf("tiny: %d KV bytes a cell, want 256", perCell)
	}
	cfg := DefaultConfig(path)
	cfg.Threads = 1
	cfg.KVBudget = 8 << 20 // 32768 cells
	e, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := e.ContextPlan()
	info := e.Info()
	if p.ContextLength != 32768 || p.KVCells != 32768 || p.TrainContext != 1<<20 || p.Slots != 4 || p.KVBytes != 8<<20 {
		t.Fatalf("plan %+v", p)
	}
	if info.ContextLength != 32768 || info.TrainContextLength != 1<<20 || e.Config().KVCells != 32768 || e.Stats().CacheLimit != 32768 {
		t.Fatalf("info %+v, config cells %d, stats %+v", info, e.Config().KVCells, e.Stats())
	}
	if !strings.Contains(p.String(), "capped: the KV memory budget") {
		t.Fatalf("plan line: %s", p)
	}
	t.Log(p)

	// The default budget (a share of this machine's memory) sizes a real
	// plan too, and an explicit ContextLength still wins.
	cfg = DefaultConfig(path)
	cfg.Threads = 1
	cfg.ContextLength = 4096
	e2, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	p2 := e2.ContextPlan()
	if p2.ContextLength != 4096 || e2.Info().ContextLength != 4096 || p2.Budget <= 0 || p2.BudgetSource == "" {
		t.Fatalf("explicit context plan %+v", p2)
	}
	t.Log(p2)
}

func TestEmbedContextDefaults(t *testing.T) {
	chat := infer.ModelMeta{ContextLength: 32768, PoolingType: -1}
	emb := infer.ModelMeta{ContextLength: 8192, PoolingType: poolingMean}
	small := infer.ModelMeta{ContextLength: 256, PoolingType: poolingCLS}
	cases := []struct {
		n    int
		m    infer.ModelMeta
		want int
	}{
		{0, chat, embedContextChat},
		{0, emb, embedContextEmbedding},
		{0, small, 256},
		{4096, emb, 4096},
		{1 << 20, infer.ModelMeta{PoolingType: -1}, maxEmbedContext},
		{100000, emb, 8192},
	}
	for _, c := range cases {
		if got := embedContextLength(c.n, c.m); got != c.want {
			t.Errorf("embedContextLength(%d, %+v) = %d, want %d", c.n, c.m, got, c.want)
		}
	}
}
