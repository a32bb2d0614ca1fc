package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/meshllm/meshllm/node/forward"
	"github.com/meshllm/meshllm/p2p"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// maxSecretFile bounds a passphrase or API token file read.
const maxSecretFile = 4 << 10

// errSecretSources is two sources given for one secret.
var errSecretSources = errors.New("give only one of")

// accessFlagDefs are the flags of who may use a peer: the mesh key (a key
// file, recommended; the key itself; or a passphrase, directly or in a
// file) and the allowlist. Each secret can come from a file or the
// environment; one given on the command line is visible to every local
// user (/proc/PID/cmdline), and join warns.
func accessFlagDefs() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "mesh-key-file", EnvVars: []string{"MESHLLM_MESH_KEY_FILE"}, TakesFile: true,
			Usage: "private mesh (the recommended way): the key file `meshllm keygen` wrote; only peers holding the same key get gossip and inference"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "mesh-key", EnvVars: []string{"MESHLLM_MESH_KEY"},
			Usage: "private mesh: the key itself (the 64 hex digits of a key file); use the environment, not the command line"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "mesh-secret", EnvVars: []string{"MESHLLM_MESH_SECRET"},
			Usage: "private mesh: a passphrase (16+ bytes) stretched into the key with argon2id; weaker than a key file (docs/security.md)"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "mesh-secret-file", EnvVars: []string{"MESHLLM_MESH_SECRET_FILE"}, TakesFile: true,
			Usage: "private mesh: a file holding the passphrase (one line)"}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "allow-peer", EnvVars: []string{"MESHLLM_ALLOW_PEERS"},
			Usage: "private mesh: peer IDs allowed to connect (repeatable); others are refused at the handshake"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "forward", EnvVars: []string{"MESHLLM_FORWARD"},
			Usage: "where this peer's own requests may be served: `any` peer, proven `members` of the private mesh, or `none` (all here); default members in a private mesh, any in an open one; a request may narrow it (X-Meshllm-Forward)"}),
	}
}

// access is who may use a peer: everyone (the zero value), the holders of a
// mesh key, the peers of an allowlist, or both; and where the peer's own
// requests may be served.
type access struct {
	key   []byte    // the mesh key (p2p.MeshKeyLen bytes); nil: no handshake
	allow []peer.ID // nil: no allowlist
	// forward is --forward, or its default (members in a private mesh,
	// any in an open one); Unset (the zero value, as in the demo) is any.
	forward forward.Policy
}

// private reports whether the mesh has a membership: a key, an
// allowlist, or both.
func (a access) private() bool { return a.key != nil || a.allow != nil }

// blockHashPurpose names the mesh subkey that keys the digests' block
// hashes; every peer of one mesh derives the same.
const blockHashPurpose = "meshllm/block-hash/1"

// hashKey is the key of the digests' block hashes (cache.SourceConfig and
// node.MeshConfig HashKey): a subkey of the mesh key, nil without one (an
// allowlist alone keys nothing: its digests reach only the allowed peers,
// but anyone reading one could test a guessed prompt).
func (a access) hashKey() []byte {
	if a.key == nil {
		return nil
	}
	return p2p.MeshSubkey(a.key, blockHashPurpose)
}

// accessFlags reads the access flags of c, warning on stderr about
// secrets given on the command line.
func accessFlags(c *cli.Context) (access, error) {
	return loadAccess(c, os.Args[1:], os.Stderr)
}

// loadAccess is accessFlags for the command line args, warning on warn.
// A passphrase is derived into the key here, once (it takes a while on
// purpose).
func loadAccess(c *cli.Context, args []string, warn io.Writer) (access, error) {
	var a access
	src, err := oneOf(c, "mesh-key-file", "mesh-key", "mesh-secret", "mesh-secret-file")
	if err != nil {
		return a, err
	}
	warnCommandLine(args, warn, "mesh-key", "--mesh-key-file or MESHLLM_MESH_KEY")
	warnCommandLine(args, warn, "mesh-secret", "--mesh-secret-file or MESHLLM_MESH_SECRET")
	v := c.String(src)
	switch src {
	case "mesh-key-file":
		b, err := readSecretFile(v, p2p.MaxMeshKeyFile, warn)
		if err != nil {
			return a, fmt.Errorf("--mesh-key-file: %w", err)
		}
		if a.key, err = p2p.ParseMeshKey(b); err != nil {
			return a, fmt.Errorf("--mesh-key-file %s: %w", v, err)
		}
	case "mesh-key":
		if a.key, err = p2p.ParseMeshKey([]byte(v)); err != nil {
			return a, fmt.Errorf("--mesh-key: %w", err)
		}
	case "mesh-secret", "mesh-secret-file":
		pass := []byte(v)
		if src == "mesh-secret-file" {
			if pass, err = readSecretFile(v, p2p.MaxPassphraseLen+2, warn); err != nil {
				return a, fmt.Errorf("--mesh-secret-file: %w", err)
			}
			pass = []byte(strings.TrimRight(string(pass), "\r\n"))
		}
		if a.key, err = p2p.MeshKeyFromPassphrase(pass); err != nil {
			return a, fmt.Errorf("--%s: %w", src, err)
		}
	}
	if ids := c.StringSlice("allow-peer"); len(ids) > 0 {
		allow, err := p2p.ParseAllowlist(ids)
		if err != nil {
			return a, err
		}
		a.allow = allow
	}
	a.forward = forward.Any
	if a.private() {
		a.forward = forward.Members
	}
	if v := c.String("forward"); v != "" {
		if a.forward, err = forward.Parse(v); err != nil {
			return a, fmt.Errorf("--forward: %w", err)
		}
	}
	return a, nil
}

// printForward tells the user where this peer's own requests may go (the
// line join prints), and warns on an open mesh that strangers may serve
// them.
func printForward(w io.Writer, a access) {
	p := forward.Resolve(a.forward, forward.Unset)
	switch {
	case p == forward.Members && !a.private():
		fmt.Fprintf(w, "forward: members — but this mesh is open (no --mesh-key-file, --mesh-secret or --allow-peer): no peer is a member, so every request is served here\n")
	default:
		fmt.Fprintf(w, "forward: %s — %s\n", p, p.Meaning())
	}
	if p == forward.Any && !a.private() {
		fmt.Fprintf(w, "meshllm: warning: open mesh: prompts may be served by strangers (any peer that joins); use --mesh-key-file for a private mesh, or --forward none\n")
	}
}

// apiToken reads the API token from --api-token or --api-token-file (or
// their environment variables), warning about one on the command line.
func apiToken(c *cli.Context) (string, error) {
	return loadAPIToken(c, os.Args[1:], os.Stderr)
}

// loadAPIToken is apiToken for the command line args, warning on warn.
func loadAPIToken(c *cli.Context, args []string, warn io.Writer) (string, error) {
	src, err := oneOf(c, "api-token", "api-token-file")
	if err != nil || src == "" {
		return "", err
	}
	warnCommandLine(args, warn, "api-token", "--api-token-file or MESHLLM_API_TOKEN")
	if src == "api-token" {
		return c.String(src), nil
	}
	b, err := readSecretFile(c.String(src), maxSecretFile, warn)
	if err != nil {
		return "", fmt.Errorf("--api-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--api-token-file %s is empty", c.String(src))
	}
	return tok, nil
}

// oneOf returns which of the flags names has a value, "" for none, and an
// error naming them when more than one has.
func oneOf(c *cli.Context, names ...string) (string, error) {
	var set []string
	for _, n := range names {
		if c.String(n) != "" {
			set = append(set, n)
		}
	}
	switch len(set) {
	case 0:
		return "", nil
	case 1:
		return set[0], nil
	}
	return "", fmt.Errorf("%w --%s: --%s are set together (by flag, environment or --config)", errSecretSources, strings.Join(names, ", --"), strings.Join(set, " and --"))
}

// warnCommandLine warns on w when the secret flag name is given in args
// (the command line, which every local user can read), suggesting
// instead.
func warnCommandLine(args []string, w io.Writer, name, instead string) {
	if onCommandLine(args, name) {
		fmt.Fprintf(w, "meshllm: warning: --%s on the command line is visible to every user of this machine (ps, /proc/PID/cmdline); use %s\n", name, instead)
	}
}

// onCommandLine reports whether flag name is given in args (-name,
// --name, with its value after = or as the next argument), before any
// "--".
func onCommandLine(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// readSecretFile reads a secret file of at most max bytes, warning on w
// when other users may read it.
func readSecretFile(path string, max int64, w io.Writer) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch mode := fi.Mode(); {
	case mode.IsRegular():
		if perm := mode.Perm(); perm&0o077 != 0 {
			fmt.Fprintf(w, "meshllm: warning: other users can read or change %s (mode %04o): chmod 600 it\n", path, perm)
		}
	case mode&os.ModeNamedPipe != 0: // a pipe: --mesh-secret-file <(pass show mesh)
	default:
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes: not a secret file", path, max)
	}
	return b, nil
}
