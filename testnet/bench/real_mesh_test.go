package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/meshllm/meshllm/testnet/real"
	"github.com/meshllm/meshllm/testnet/workload"
)

// TestRealMeshEnv starts real peers with the meshllm binary named by
// MESHLLM_REAL_BIN (what `meshllm testnet up` does) and drives them with
// an MMLU workload (what `meshllm bench --target` does), printing the row:
// the real-mode measurement of docs/results.md, off by default.
//
//	make build && MESHLLM_REAL_BIN=$PWD/bin/meshllm go test ./testnet/bench -run RealMeshEnv -v -timeout 30m
//
// MESHLLM_REAL_PEERS (4), MESHLLM_REAL_REQUESTS (200), MESHLLM_REAL_RATE
// (2 per second) and MESHLLM_REAL_MODEL (stories260K) change the run.
func TestRealMeshEnv(t *testing.T) {
	bin := os.Getenv("MESHLLM_REAL_BIN")
	if bin == "" {
		t.Skip("set MESHLLM_REAL_BIN to a built meshllm to run real peers")
	}
	env := func(k string, def float64) float64 {
		if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
			return v
		}
		return def
	}
	model := os.Getenv("MESHLLM_REAL_MODEL")
	if model == "" {
		model, _ = filepath.Abs(filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	tn, err := real.Up(ctx, real.UpConfig{Binary: bin, Peers: int(env("MESHLLM_REAL_PEERS", 4)), Model: model,
		DataDir: t.TempDir(), Args: []string{"--slots", "16", "--ctx", "4096", "--kv-cells", strconv.Itoa(HalfSubjects), "--threads", "1", "--queue", "64"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	wctx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	if err := tn.WaitMesh(wctx, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	o, err := Scenario("paper")
	if err != nil {
		t.Fatal(err)
	}
	o.Scenario = "real"
	o.MMLUDir = mmluDir(t)
	o.Requests, o.Rate = int(env("MESHLLM_REAL_REQUESTS", 200)), env("MESHLLM_REAL_RATE", 2)
	o.Skews = []workload.Skew{workload.Uniform, {Zipf: true, S: 1.1}}
	rep, err := RunReal(ctx, o, real.Config{Targets: tn.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	t.Log("\n" + b.String())
}
