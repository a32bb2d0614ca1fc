package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/meshllm/meshllm/p2p"
	"github.com/urfave/cli/v2"
)

// keygenCommand is `meshllm keygen PATH`: a new mesh key file.
func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "write a new random mesh key file (mode 0600) for a private mesh; give it to each member as --mesh-key-file",
		ArgsUsage: "PATH",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("keygen: give the path of the key file to write: meshllm keygen PATH")
			}
			path := c.Args().First()
			if err := writeMeshKeyFile(path); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "wrote a new mesh key to %s (mode 0600)\n", path)
			fmt.Fprintf(c.App.ErrWriter, "  copy it to each member over a channel you trust, then: meshllm join --mesh-key-file %s ...\n", path)
			return nil
		},
	}
}

// writeMeshKeyFile writes a new random mesh key to path, readable by its
// owner only. It never overwrites: members holding the old key would be
// locked out of the mesh.
func writeMeshKeyFile(path string) (err error) {
	b, err := p2p.MarshalMeshKey(p2p.GenerateMeshKey())
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("keygen: %s exists; keygen never overwrites a key (members holding it would be locked out): remove it first or pick another path", path)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			err = fmt.Errorf("keygen: %w", err)
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}
