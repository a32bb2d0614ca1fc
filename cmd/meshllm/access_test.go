package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshllm/meshllm/p2p"
	"github.com/urfave/cli/v2"
)

// runAccess runs a command carrying the access and HTTP flags on args and
// returns what loadAccess and loadAPIToken made of them, with the
// warnings they printed.
func runAccess(t *testing.T, args ...string) (access, string, string, error) {
	t.Helper()
	var (
		acc  access
		tok  string
		warn bytes.Buffer
		err  error
	)
	app := &cli.App{Commands: []*cli.Command{{
		Name:  "join",
		Flags: append(accessFlagDefs(), httpFlags()...),
		Action: func(c *cli.Context) error {
			if acc, err = loadAccess(c, args, &warn); err != nil {
				return nil
			}
			tok, err = loadAPIToken(c, args, &warn)
			return nil
		},
	}}}
	if rerr := app.Run(append([]string{"meshllm", "join"}, args...)); rerr != nil {
		t.Fatal(rerr)
	}
	return acc, tok, warn.String(), err
}

// writeFile writes a file of mode perm in the test's directory.
func writeFile(t *testing.T, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// TestKeygen: keygen writes a parseable key, mode 0600, and refuses to
// overwrite an existing file (which keeps its key).
func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.key")
	var stderr bytes.Buffer
	app := newApp()
	app.ErrWriter = &stderr
	if err := app.Run([]string{"meshllm", "keygen", path}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", fi.Mode().Perm())
	}
	first, _ := os.ReadFile(path)
	key, err := p2p.ParseMeshKey(first)
	if err != nil || len(key) != p2p.MeshKeyLen {
		t.Fatalf("keygen wrote %q: %v", first, err)
	}
	if !strings.Contains(stderr.String(), "--mesh-key-file "+path) {
		t.Fatalf("keygen said %q", stderr.String())
	}
	err = app.Run([]string{"meshllm", "keygen", path})
	if err == nil || !strings.Contains(err.Error(), "never overwrites") {
		t.Fatalf("second keygen on the same path: %v", err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, first) {
		t.Fatal("keygen changed an existing key file")
	}
	if err := app.Run([]string{"meshllm", "keygen"}); err == nil {
		t.Fatal("keygen without a path succeeded")
	}
}

// TestAccessSecrets: each secret comes from a file, the environment or
// the command line (with a warning); two sources for one secret, bad
// files and group-readable files are reported.
func TestAccessSecrets(t *testing.T) {
	key := p2p.GenerateMeshKey()
	keyFile, err := p2p.MarshalMeshKey(key)
	if err != nil {
		t.Fatal(err)
	}
	const pass = "correct horse battery staple"
	passKey, err := p2p.MeshKeyFromPassphrase([]byte(pass))
	if err != nil {
		t.Fatal(err)
	}
	private := writeFile(t, "mesh.key", string(keyFile), 0o600)

	t.Run("key file", func(t *testing.T) {
		acc, _, warn, err := runAccess(t, "--mesh-key-file", private)
		if err != nil || !bytes.Equal(acc.key, key) || warn != "" {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("key file from the environment", func(t *testing.T) {
		t.Setenv("MESHLLM_MESH_KEY_FILE", private)
		acc, _, warn, err := runAccess(t)
		if err != nil || !bytes.Equal(acc.key, key) || warn != "" {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("key from the environment", func(t *testing.T) {
		t.Setenv("MESHLLM_MESH_KEY", strings.Fields(string(keyFile))[2])
		acc, _, warn, err := runAccess(t)
		if err != nil || !bytes.Equal(acc.key, key) || warn != "" {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("group-readable key file", func(t *testing.T) {
		acc, _, warn, err := runAccess(t, "--mesh-key-file", writeFile(t, "open.key", string(keyFile), 0o644))
		if err != nil || !bytes.Equal(acc.key, key) || !strings.Contains(warn, "chmod 600") {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("malformed key file", func(t *testing.T) {
		_, _, _, err := runAccess(t, "--mesh-key-file", writeFile(t, "bad.key", "not a key\n", 0o600))
		if !errors.Is(err, p2p.ErrMeshKey) {
			t.Fatalf("err %v, want ErrMeshKey", err)
		}
	})
	t.Run("passphrase file", func(t *testing.T) {
		acc, _, warn, err := runAccess(t, "--mesh-secret-file", writeFile(t, "pass", pass+"\n", 0o600))
		if err != nil || !bytes.Equal(acc.key, passKey) || warn != "" {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("passphrase from the environment", func(t *testing.T) {
		t.Setenv("MESHLLM_MESH_SECRET", pass)
		acc, _, warn, err := runAccess(t)
		if err != nil || !bytes.Equal(acc.key, passKey) || warn != "" {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("passphrase on the command line", func(t *testing.T) {
		acc, _, warn, err := runAccess(t, "--mesh-secret="+pass)
		if err != nil || !bytes.Equal(acc.key, passKey) || !strings.Contains(warn, "--mesh-secret on the command line") {
			t.Fatalf("key %x, warnings %q, err %v", acc.key, warn, err)
		}
	})
	t.Run("short passphrase", func(t *testing.T) {
		_, _, _, err := runAccess(t, "--mesh-secret-file", writeFile(t, "short", "short\n", 0o600))
		if !errors.Is(err, p2p.ErrPassphrase) {
			t.Fatalf("err %v, want ErrPassphrase", err)
		}
	})
	t.Run("two sources", func(t *testing.T) {
		t.Setenv("MESHLLM_MESH_SECRET", pass)
		_, _, _, err := runAccess(t, "--mesh-key-file", private)
		if !errors.Is(err, errSecretSources) {
			t.Fatalf("err %v, want errSecretSources", err)
		}
	})
	t.Run("api token file", func(t *testing.T) {
		_, tok, warn, err := runAccess(t, "--api-token-file", writeFile(t, "token", "s3cret-token\n", 0o600))
		if err != nil || tok != "s3cret-token" || warn != "" {
			t.Fatalf("token %q, warnings %q, err %v", tok, warn, err)
		}
	})
	t.Run("api token on the command line", func(t *testing.T) {
		_, tok, warn, err := runAccess(t, "--api-token", "s3cret-token")
		if err != nil || tok != "s3cret-token" || !strings.Contains(warn, "--api-token on the command line") {
			t.Fatalf("token %q, warnings %q, err %v", tok, warn, err)
		}
	})
	t.Run("api token twice", func(t *testing.T) {
		t.Setenv("MESHLLM_API_TOKEN", "a")
		_, _, _, err := runAccess(t, "--api-token-file", writeFile(t, "token", "b", 0o600))
		if !errors.Is(err, errSecretSources) {
			t.Fatalf("err %v, want errSecretSources", err)
		}
	})
	t.Run("oversized secret file", func(t *testing.T) {
		_, _, _, err := runAccess(t, "--api-token-file", writeFile(t, "big", strings.Repeat("x", maxSecretFile+1), 0o600))
		if err == nil || !strings.Contains(err.Error(), "over") {
			t.Fatalf("err %v", err)
		}
	})
}
