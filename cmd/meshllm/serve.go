package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshllm/meshllm/node"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// httpFlags configure the HTTP API (node.Config).
func httpFlags() []cli.Flag {
	d := node.DefaultConfig()
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "listen", Value: d.ListenAddr, EnvVars: []string{"MESHLLM_LISTEN"},
			Usage: "HTTP address of the OpenAI and Ollama APIs; loopback unless you also set --api-token"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "api-token", EnvVars: []string{"MESHLLM_API_TOKEN"},
			Usage: "bearer token the API requires (mandatory off loopback)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "max-tokens-limit", EnvVars: []string{"MESHLLM_MAX_TOKENS_LIMIT"},
			Usage: "largest max_tokens a request may ask (default: the context length)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "request-timeout", Value: d.RequestTimeout, EnvVars: []string{"MESHLLM_REQUEST_TIMEOUT"},
			Usage: "longest one request may take, queueing included"}),
	}
}

func httpConfig(c *cli.Context) node.Config {
	cfg := node.DefaultConfig()
	cfg.ListenAddr = c.String("listen")
	cfg.APIToken = c.String("api-token")
	cfg.MaxTokensLimit = c.Int("max-tokens-limit")
	cfg.RequestTimeout = c.Duration("request-timeout")
	return cfg
}

func serveCommand() *cli.Command {
	return withConfigFile(&cli.Command{
		Name:  "serve",
		Usage: "serve a model on this machine over the OpenAI and Ollama APIs",
		Flags: append(engineFlags(), httpFlags()...),
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			eng, err := loadEngine(c)
			if err != nil {
				return err
			}
			defer eng.Close()
			srv, err := node.NewServer(httpConfig(c), eng)
			if err != nil {
				return err
			}
			printEndpoints(srv.Config().ListenAddr, eng.Info().Name)
			return srv.ListenAndServe(ctx)
		},
	})
}

// printEndpoints tells the user how to point a chat app at the peer.
func printEndpoints(addr, model string) {
	fmt.Fprintf(os.Stderr, "serving %s on http://%s\n", model, addr)
	fmt.Fprintf(os.Stderr, "  OpenAI clients: base URL http://%s/v1  (model %q)\n", addr, model)
	fmt.Fprintf(os.Stderr, "  Ollama clients: OLLAMA_HOST=http://%s\n", addr)
	fmt.Fprintf(os.Stderr, "  metrics: http://%s/metrics   health: http://%s/healthz\n", addr, addr)
}

// withConfigFile adds --config to cmd: a YAML file whose keys are cmd's
// flags (flags and env vars win over it).
func withConfigFile(cmd *cli.Command) *cli.Command {
	cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: "config", EnvVars: []string{"MESHLLM_CONFIG"},
		Usage: "YAML file with any of these flags as keys (flags and env vars win over it)"})
	cmd.Before = altsrc.InitInputSourceWithContext(cmd.Flags, altsrc.NewYamlSourceFromFlagFunc("config"))
	return cmd
}
