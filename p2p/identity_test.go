package p2p

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestIdentityCreatedWithPrivateModesAndReloaded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k1.Type() != crypto.Ed25519 {
		t.Fatalf("key type %v, want Ed25519", k1.Type())
	}
	st, err := os.Stat(filepath.Join(dir, IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode %#o, want 0600", got)
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := dst.Mode().Perm(); got != 0o700 {
		t.Errorf("data dir mode %#o, want 0700", got)
	}
	k2, err := LoadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equals(k2) {
		t.Fatal("second load returned a different key")
	}
	id1, _ := peer.IDFromPrivateKey(k1)
	id2, _ := peer.IDFromPrivateKey(k2)
	if id1 != id2 {
		t.Fatalf("PeerID changed across loads: %s -> %s", id1, id2)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".identity-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestIdentityRefusesFilesOthersCanAccess(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o666} {
		dir := t.TempDir()
		k, err := LoadOrCreateIdentity(dir)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, IdentityFile)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err = LoadOrCreateIdentity(dir)
		if !errors.Is(err, ErrIdentityPermissions) {
			t.Fatalf("mode %#o: err = %v, want ErrIdentityPermissions", mode, err)
		}
		if !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), path) {
			t.Errorf("mode %#o: error does not say how to fix it: %v", mode, err)
		}
		// Refused, not repaired: the file is untouched, and fixing the
		// mode as told keeps the identity.
		st, _ := os.Stat(path)
		if st.Mode().Perm() != mode {
			t.Errorf("mode changed to %#o behind the operator's back", st.Mode().Perm())
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		k2, err := LoadOrCreateIdentity(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !k.Equals(k2) {
			t.Fatal("identity changed after chmod 600")
		}
	}
}

func TestIdentityRejectsBadFiles(t *testing.T) {
	other, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherType, err := crypto.MarshalPrivateKey(other)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"garbage":   []byte("not a key"),
		"empty":     nil,
		"secp256k1": otherType,
		"huge":      make([]byte, 5<<10),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, IdentityFile), content, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateIdentity(dir); err == nil {
				t.Fatal("bad key file accepted")
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, IdentityFile), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateIdentity(dir); err == nil {
			t.Fatal("a directory accepted as key file")
		}
	})
	t.Run("no dir", func(t *testing.T) {
		if _, err := LoadOrCreateIdentity(""); err == nil {
			t.Fatal("empty data dir accepted")
		}
	})
}

func TestIdentityConcurrentCreatorsAgree(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	keys := make([]crypto.PrivKey, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = LoadOrCreateIdentity(dir)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("creator %d: %v", i, errs[i])
		}
		if !keys[i].Equals(keys[0]) {
			t.Fatalf("creator %d got a different key", i)
		}
	}
}

func FuzzDecodeIdentity(f *testing.F) {
	k, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	raw, _ := crypto.MarshalPrivateKey(k)
	f.Add(raw)
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x01, 0x12, 0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, err := decodeIdentity(b)
		if err != nil {
			return
		}
		if key.Type() != crypto.Ed25519 {
			t.Fatalf("accepted key type %v", key.Type())
		}
		again, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := decodeIdentity(again)
		if err != nil || !k2.Equals(key) {
			t.Fatalf("re-encoded key does not round-trip: %v", err)
		}
	})
}
