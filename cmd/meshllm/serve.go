package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// httpFlags configure the HTTP API (httpapi.Config).
func httpFlags() []cli.Flag {
	d := httpapi.DefaultConfig()
	return []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "listen", Value: d.ListenAddr, EnvVars: []string{"MESHLLM_LISTEN"},
			Usage: "HTTP address of the OpenAI and Ollama APIs; loopback unless you also set --api-token"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "api-token", EnvVars: []string{"MESHLLM_API_TOKEN"},
			Usage: "bearer token the API requires (mandatory off loopback); prefer --api-token-file or the environment"}),
		altsrc.NewStringFlag(&cli.StringFlag{Name: "api-token-file", EnvVars: []string{"MESHLLM_API_TOKEN_FILE"}, TakesFile: true,
			Usage: "a file holding the bearer token (instead of --api-token)"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "max-tokens-limit", EnvVars: []string{"MESHLLM_MAX_TOKENS_LIMIT"},
			Usage: "largest max_tokens a request may ask (default: the context length)"}),
		altsrc.NewDurationFlag(&cli.DurationFlag{Name: "request-timeout", Value: d.RequestTimeout, EnvVars: []string{"MESHLLM_REQUEST_TIMEOUT"},
			Usage: "longest one request may take, queueing included"}),
		altsrc.NewIntFlag(&cli.IntFlag{Name: "max-connections", Value: d.MaxConnections, EnvVars: []string{"MESHLLM_MAX_CONNECTIONS"},
			Usage: "most HTTP connections held open at once; more wait until one closes (0: no limit)"}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "allowed-origins", EnvVars: []string{"MESHLLM_ORIGINS"},
			Usage: "browser origins, besides localhost's and desktop apps', whose web apps may call the API " +
				"(repeatable or comma-separated; e.g. http://192.168.1.5:3000, chrome-extension://ID, https://*.example.com; * for any)"}),
	}
}

func httpConfig(c *cli.Context) (httpapi.Config, error) {
	cfg := httpapi.DefaultConfig()
	cfg.ListenAddr = c.String("listen")
	tok, err := apiToken(c)
	if err != nil {
		return cfg, err
	}
	cfg.APIToken = tok
	cfg.MaxTokensLimit = c.Int("max-tokens-limit")
	cfg.RequestTimeout = c.Duration("request-timeout")
	cfg.MaxConnections = c.Int("max-connections")
	for _, o := range c.StringSlice("allowed-origins") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	return cfg, nil
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
			emb, err := loadEmbedder(c)
			if err != nil {
				return err
			}
			if emb != nil {
				defer emb.Close()
			}
			hcfg, err := httpConfig(c)
			if err != nil {
				return err
			}
			srv, err := httpapi.NewServer(hcfg, eng, httpapi.WithEmbeddings(embeddingsOf(emb)))
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
