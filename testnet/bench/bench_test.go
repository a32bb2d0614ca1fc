package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/testnet/mmlu"
)

func mmluDir(t *testing.T) string {
	dir := filepath.Join("..", "..", mmlu.DefaultDir)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("MMLU data not available: %v", err)
	}
	return dir
}

// TestQuickScenario runs a small paper-shaped grid under every policy and
// checks the structural properties that must hold whatever the numbers.
func TestQuickScenario(t *testing.T) {
	o, err := Scenario("quick")
	if err != nil {
		t.Fatal(err)
	}
	o.MMLUDir = mmluDir(t)
	calls := 0
	rep, err := Run(o, func(done, total int) {
		calls++
		if done != calls || total != 2*2*len(o.Policies) {
			t.Errorf("progress %d/%d at call %d", done, total, calls)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2*2*len(o.Policies) {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	byKey := map[string]Row{}
	for _, r := range rep.Rows {
		byKey[r.Policy+"/"+r.Skew+"/"+strings.TrimSuffix(strings.TrimSuffix(jsonNum(r.LinkMS), ".0"), "")] = r
		if r.Requests != o.Requests {
			t.Errorf("%s: %d requests", r.Policy, r.Requests)
		}
		if r.Policy == "local" && (r.Forwarded != 0 || r.VsLocal != 1) {
			t.Errorf("local forwarded %.2f, vs local %.2f", r.Forwarded, r.VsLocal)
		}
		if r.LinkMS == 1000 && (r.Policy == "meshllm" || r.Policy == "oracle") && r.Forwarded != 0 {
			t.Errorf("%s forwarded %.2f over 1000 ms links", r.Policy, r.Forwarded)
		}
		if r.Centralised != (r.Policy != "local" && r.Policy != "paper" && r.Policy != "meshllm") {
			t.Errorf("%s: centralised %v", r.Policy, r.Centralised)
		}
		if (r.Policy == "paper" || r.Policy == "meshllm") != (r.GossipBytes > 0) {
			t.Errorf("%s: gossip %.0f B/s", r.Policy, r.GossipBytes)
		}
		if r.HitRate <= 0 || r.HitRate >= 1 || r.P50Latency > r.P99Latency || r.MeanTTFT > r.MeanLatency {
			t.Errorf("%s: implausible row %+v", r.Policy, r)
		}
	}
	// Over 1000 ms links meshllm never loses to local (it never forwards),
	// while the paper's rule does.
	for _, skew := range []string{"uniform", "zipf:1.1"} {
		l, m, p := byKey["local/"+skew+"/1000"], byKey["meshllm/"+skew+"/1000"], byKey["paper/"+skew+"/1000"]
		if m.MeanLatency != l.MeanLatency || p.MeanLatency <= l.MeanLatency {
			t.Errorf("%s at 1000 ms: local %.3f meshllm %.3f paper %.3f", skew, l.MeanLatency, m.MeanLatency, p.MeanLatency)
		}
		// At 2 ms the cache-aware policies hit more than local.
		if byKey["meshllm/"+skew+"/2"].HitRate <= byKey["local/"+skew+"/2"].HitRate {
			t.Errorf("%s at 2 ms: meshllm hit %.3f <= local %.3f", skew, byKey["meshllm/"+skew+"/2"].HitRate, byKey["local/"+skew+"/2"].HitRate)
		}
	}

	// Outputs: the JSON contract, CSV, markdown, PNGs.
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Scenario string           `json:"scenario"`
		Rows     []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil || decoded.Scenario != "quick" {
		t.Fatalf("json: %v %q", err, decoded.Scenario)
	}
	for _, k := range []string{"policy", "workload", "skew", "peers", "link_ms", "requests", "mean_latency_s", "p50_latency_s",
		"p99_latency_s", "mean_ttft_s", "hit_rate", "request_hit_rate", "forwarded", "max_share", "gossip_bytes_per_peer_s"} {
		if _, ok := decoded.Rows[0][k]; !ok {
			t.Errorf("JSON row lacks %q", k)
		}
	}
	dir := t.TempDir()
	files, err := rep.WriteDir(dir, "meshllm bench --scenario quick")
	if err != nil {
		t.Fatal(err)
	}
	pngs := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".png") {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(fh); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			fh.Close()
			pngs++
		}
	}
	if pngs < 3 {
		t.Errorf("%d PNGs in %v", pngs, files)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !bytes.Contains(md, []byte("| meshllm |")) {
		t.Error("report.md lacks the meshllm row")
	}
}

func jsonNum(v float64) string { b, _ := json.Marshal(v); return string(b) }

// TestScenarioEnv runs the scenario named by MESHLLM_BENCH_SCENARIO and
// prints its table: the long measurements of docs/results.md, off by
// default.
//
//	MESHLLM_BENCH_SCENARIO=paper go test ./testnet/bench -run ScenarioEnv -v
func TestScenarioEnv(t *testing.T) {
	name := os.Getenv("MESHLLM_BENCH_SCENARIO")
	if name == "" {
		t.Skip("set MESHLLM_BENCH_SCENARIO to run a scenario")
	}
	o, err := Scenario(name)
	if err != nil {
		t.Fatal(err)
	}
	o.MMLUDir = mmluDir(t)
	rep, err := Run(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	t.Log("\n" + b.String())
	if dir := os.Getenv("MESHLLM_BENCH_OUT"); dir != "" {
		if _, err := rep.WriteDir(dir, "meshllm bench --scenario "+name); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseLists(t *testing.T) {
	if f, err := ParseFloats("0.5, 2,1000"); err != nil || len(f) != 3 || f[0] != 0.5 {
		t.Fatal(f, err)
	}
	if _, err := ParseInts("1,2.5"); err == nil {
		t.Fatal("2.5 accepted as an integer")
	}
	if s, err := ParseSkews("uniform,zipf:1.1"); err != nil || len(s) != 2 || !s[1].Zipf {
		t.Fatal(s, err)
	}
	for _, name := range Scenarios() {
		o, err := Scenario(name)
		if err != nil {
			t.Fatal(err)
		}
		o.MMLUDir = "x"
		if err := o.validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Scenario("nope"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}
