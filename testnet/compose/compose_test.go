package compose

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestComposeMeshForwards builds the image, brings up docker-compose.yml
// (five containers), and checks that a same-prefix request sent through a
// peer that does not hold the prefix is forwarded to the one that does and
// served from its cache. It also checks that every metric the Grafana
// dashboard and the alert rules use is exported by a real peer.
//
// Opt-in (MESHLLM_COMPOSE=1): it needs Docker and Compose, and bin/meshllm
// (or builds it with make build).
func TestComposeMeshForwards(t *testing.T) {
	if os.Getenv("MESHLLM_COMPOSE") != "1" {
		t.Skip("set MESHLLM_COMPOSE=1 to run the docker-compose mesh")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomHex(4)
	image := "meshllm:compose-test-" + suffix
	build := exec.Command(filepath.Join(root, "scripts", "docker-image.sh"), image)
	build.Dir = root
	if _, err := os.Stat(filepath.Join(root, "bin", "meshllm")); err == nil {
		build.Env = append(os.Environ(), "MESHLLM_SKIP_BUILD=1")
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "--force", image).Run() })

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log strings.Builder
	started := time.Now()
	m, err := Up(ctx, Config{Dir: root, Project: "meshllm-test-" + suffix, Image: image, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			if logs, err := m.Logs(context.Background(), ""); err == nil {
				t.Logf("container logs:\n%s", logs)
			}
		}
		if err := m.Down(context.Background()); err != nil {
			t.Errorf("compose down: %v", err)
		}
	})
	res, err := m.Demo(ctx, &log, started)
	t.Logf("demo:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Forwarded() {
		t.Fatalf("%s did not forward to the prefix holder %s: decision %+v, usage %+v, served by peer %v",
			res.Entry, res.Holder, res.Decision, res.Routed, res.ServedByPeer)
	}
	if res.Decision.RealizedCached < res.Routed.PromptTokens/2 {
		t.Fatalf("the holder reused %d of %d prompt tokens", res.Decision.RealizedCached, res.Routed.PromptTokens)
	}

	exp, err := m.Metrics(ctx, res.Entry)
	if err != nil {
		t.Fatal(err)
	}
	present := families(exp)
	for _, name := range monitoredMetrics(t, root) {
		switch {
		case present[name] || onlyAfterEvent[name]:
		case pendingMetrics[name]:
			t.Logf("the dashboard uses %s, which peers do not export yet", name)
		default:
			t.Errorf("the dashboard or the alert rules use %s, which a peer does not export", name)
		}
	}
}

// TestDownRemovesEverything: after Down no container or network of the
// project is left.
func TestDownRemovesEverything(t *testing.T) {
	if os.Getenv("MESHLLM_COMPOSE") != "1" {
		t.Skip("set MESHLLM_COMPOSE=1 to run the docker-compose mesh")
	}
	project := "meshllm-test-" + randomHex(4)
	// A mesh whose image does not exist: up fails, and Up must clean up.
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Up(ctx, Config{Dir: root, Project: project, Image: "meshllm:does-not-exist-" + randomHex(4)}); err == nil {
		t.Fatal("Up succeeded with an image that does not exist")
	}
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "label=com.docker.compose.project=" + project},
		{"network", "ls", "-q", "--filter", "label=com.docker.compose.project=" + project},
	} {
		out, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("docker %s: left behind %s", strings.Join(args, " "), s)
		}
	}
}
