package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// IdentityFile is the name of the identity key inside a data directory.
const IdentityFile = "identity.key"

// ErrIdentityPermissions is returned (wrapped) by LoadOrCreateIdentity when
// the key file can be read or written by users other than its owner.
var ErrIdentityPermissions = errors.New("p2p: identity key file is accessible to other users")

// LoadOrCreateIdentity returns the peer's Ed25519 key from
// dataDir/identity.key, creating the directory (0700) and a new key (file
// mode 0600) when there is none, so a peer keeps its PeerID across
// restarts.
//
// A key file whose mode grants any access to group or others is refused,
// not repaired: another user may already have copied the key and could
// impersonate the peer, so a silent chmod would hide that. The error says
// how to proceed: chmod 600 the file to keep the identity, or delete it to
// get a new one. Keys that are not Ed25519 are refused too.
//
// It is safe to call from several goroutines or processes: a new key is
// written to a temporary file and linked into place, so concurrent
// creators agree on one key.
func LoadOrCreateIdentity(dataDir string) (crypto.PrivKey, error) {
	if dataDir == "" {
		return nil, errors.New("p2p: no data directory for the identity key")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	path := filepath.Join(dataDir, IdentityFile)
	key, err := readIdentity(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	if err := writeNewFile(path, raw); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: use theirs.
			return readIdentity(path)
		}
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	return priv, nil
}

// readIdentity reads and checks an existing key file.
func readIdentity(path string) (crypto.PrivKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("p2p: identity: %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o; run `chmod 600 %s` to keep this identity, or delete the file to create a new one", ErrIdentityPermissions, path, perm, path)
	}
	// A marshalled Ed25519 key is 68 bytes; refuse anything huge before
	// reading it.
	const maxKeyFile = 4 << 10
	if st.Size() > maxKeyFile {
		return nil, fmt.Errorf("p2p: identity: %s is %d bytes, not a key", path, st.Size())
	}
	raw := make([]byte, st.Size())
	if _, err := f.ReadAt(raw, 0); err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	key, err := decodeIdentity(raw)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity %s: %w", path, err)
	}
	return key, nil
}

// decodeIdentity parses a marshalled private key and insists on Ed25519.
func decodeIdentity(raw []byte) (crypto.PrivKey, error) {
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, err
	}
	if key.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("key type %v, want Ed25519", key.Type())
	}
	return key, nil
}

// writeNewFile writes data to path with mode 0600, atomically, and fails
// with fs.ErrExist when path already exists.
func writeNewFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".identity-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// Link fails if path exists, unlike Rename, so two creators cannot
	// overwrite each other's key.
	err = os.Link(tmp.Name(), path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links on this file system: exclusive create instead (a
	// crash mid-write leaves a short file, which then fails to decode).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
