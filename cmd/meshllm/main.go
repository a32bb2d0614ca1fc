// Command meshllm runs a meshllm peer and its tools.
//
//	meshllm join --model PATH|NAME      serve a model and join the mesh
//	meshllm serve --model PATH|NAME     serve a model over the OpenAI and Ollama APIs
//	meshllm demo                        start a peer on stories260K and send it real requests
//	meshllm calibrate --model PATH      measure the engine and write a sim profile
//	meshllm model synth --shape NAME    write a synthetic GGUF with a real model's shape
//	meshllm testnet up --peers N         N real peers on loopback (one bootstrap)
//	meshllm bench-engine                prefill/decode/TTFT figures on a synthetic model
//
// Settings come from flags, then MESHLLM_* environment variables, then the
// YAML file named by --config, then the defaults documented in each flag.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "meshllm:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "meshllm",
		Usage:   "a peer-to-peer LLM serving mesh",
		Version: version,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Usage: "log debug output, including llama.cpp's", EnvVars: []string{"MESHLLM_VERBOSE"}},
		},
		Before: func(c *cli.Context) error {
			level := slog.LevelWarn // llama.cpp logs through slog's default level
			if c.Bool("verbose") {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return nil
		},
		Commands: []*cli.Command{
			joinCommand(),
			serveCommand(),
			keygenCommand(),
			statusCommand(),
			peersCommand(),
			demoCommand(),
			calibrateCommand(),
			modelCommand(),
			benchEngineCommand(),
			benchCommand(),
			testnetCommand(),
		},
	}
}
