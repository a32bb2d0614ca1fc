package p2p

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/crypto/argon2"
)

// MeshKeyLen is the size of a mesh key, in bytes.
const MeshKeyLen = 32

// MinPassphraseLen is the shortest mesh passphrase accepted, in bytes.
const MinPassphraseLen = 16

// MaxPassphraseLen bounds a mesh passphrase, in bytes.
const MaxPassphraseLen = 1024

// The passphrase KDF: argon2id (RFC 9106) with these parameters and a
// fixed salt. They are part of the protocol: every member must derive the
// same key, so they cannot be tuned per peer. A derivation takes about
// half a second and 256 MiB on one 2-core machine (BenchmarkPassphraseGuess
// prints the rate), and that is each guess's cost to an attacker who
// holds a proof to grind. The salt is fixed (the same for every meshllm
// mesh) because members share nothing else to salt with: a dictionary
// computed once serves against every passphrase mesh, one more reason to
// prefer key files.
const (
	PassphraseKDFTime      = 2         // argon2id passes
	PassphraseKDFMemoryKiB = 256 << 10 // 256 MiB
	PassphraseKDFThreads   = 4
	passphraseSalt         = "meshllm mesh passphrase -> mesh key, argon2id, v1"
)

// meshKeyHeader starts a mesh key file, as "/key/swarm/psk/1.0.0/" starts
// a libp2p swarm.key: the format's name and version, then the encoding,
// then the key.
const (
	meshKeyHeader   = "/key/meshllm/mesh/1.0.0/"
	meshKeyEncoding = "/base16/"
	// MaxMeshKeyFile bounds the size of a mesh key file read.
	MaxMeshKeyFile = 512
)

var (
	// ErrMeshKey is a malformed mesh key or key file.
	ErrMeshKey = errors.New("p2p: malformed mesh key")
	// ErrPassphrase is a passphrase too short or too long.
	ErrPassphrase = fmt.Errorf("p2p: a mesh passphrase must be %d to %d bytes", MinPassphraseLen, MaxPassphraseLen)
)

// GenerateMeshKey returns a new random mesh key.
func GenerateMeshKey() []byte {
	k := make([]byte, MeshKeyLen)
	_, _ = rand.Read(k) // never fails (crypto/rand panics instead)
	return k
}

// MarshalMeshKey encodes key as a mesh key file: three lines, the format
// header, the encoding and the key in hex.
func MarshalMeshKey(key []byte) ([]byte, error) {
	if len(key) != MeshKeyLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrMeshKey, len(key), MeshKeyLen)
	}
	return fmt.Appendf(nil, "%s\n%s\n%s\n", meshKeyHeader, meshKeyEncoding, hex.EncodeToString(key)), nil
}

// ParseMeshKey decodes a mesh key file (MarshalMeshKey's format), or the
// bare 64 hex digits of its last line; surrounding white space and CRLF
// line ends are accepted, nothing else.
func ParseMeshKey(b []byte) ([]byte, error) {
	if len(b) > MaxMeshKeyFile {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrMeshKey, len(b), MaxMeshKeyFile)
	}
	lines := bytes.Fields(b)
	switch {
	case len(lines) == 3 && string(lines[0]) == meshKeyHeader && string(lines[1]) == meshKeyEncoding:
		lines = lines[2:]
	case len(lines) == 1:
	default:
		return nil, fmt.Errorf("%w: want %q, %q and the key in hex, one a line", ErrMeshKey, meshKeyHeader, meshKeyEncoding)
	}
	if len(lines[0]) != 2*MeshKeyLen {
		return nil, fmt.Errorf("%w: %d hex digits, want %d", ErrMeshKey, len(lines[0]), 2*MeshKeyLen)
	}
	key := make([]byte, MeshKeyLen)
	if _, err := hex.Decode(key, lines[0]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMeshKey, err)
	}
	return key, nil
}

// MeshKeyFromPassphrase derives the mesh key of a passphrase with argon2id
// (the PassphraseKDF* parameters): slow and memory-hard on purpose, so run
// it once at startup. Every peer given the same passphrase gets the same
// key.
func MeshKeyFromPassphrase(pass []byte) ([]byte, error) {
	if len(pass) < MinPassphraseLen || len(pass) > MaxPassphraseLen {
		return nil, fmt.Errorf("%w (got %d)", ErrPassphrase, len(pass))
	}
	return argon2.IDKey(pass, []byte(passphraseSalt), PassphraseKDFTime, PassphraseKDFMemoryKiB, PassphraseKDFThreads, MeshKeyLen), nil
}

// MeshSubkey derives, from a mesh key, the key of one purpose (the
// membership handshake, keyed digests...): HMAC-SHA256 of a label and the
// purpose. Keys of distinct purposes are independent, so no use of the
// mesh key can be turned against another.
func MeshSubkey(meshKey []byte, purpose string) []byte {
	h := hmac.New(sha256.New, meshKey)
	h.Write([]byte("meshllm mesh subkey v1\x00"))
	h.Write([]byte(purpose))
	return h.Sum(nil)
}
