package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshllm/meshllm/node"
	"github.com/meshllm/meshllm/node/httpapi"
	"github.com/urfave/cli/v2"
)

// statusFlags select the peer to ask.
func statusFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api", Value: "http://" + httpapi.DefaultConfig().ListenAddr, EnvVars: []string{"MESHLLM_API"},
			Usage: "HTTP address of the peer to ask"},
		&cli.StringFlag{Name: "api-token", EnvVars: []string{"MESHLLM_API_TOKEN"}, Usage: "bearer token, if the peer requires one"},
		&cli.BoolFlag{Name: "json", Usage: "print the raw /v1/mesh JSON"},
	}
}

// fetchMesh reads GET /v1/mesh?recent=1 from the peer.
func fetchMesh(c *cli.Context) (*node.MeshStatus, []byte, error) {
	url := strings.TrimSuffix(c.String("api"), "/") + "/v1/mesh?recent=1"
	req, err := http.NewRequestWithContext(c.Context, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	if tok := c.String("api-token"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("no peer answering at %s (is `meshllm join` running? pass --api): %w", c.String("api"), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: %s: %s (a `meshllm serve` peer has no mesh: use `meshllm join`)", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var st node.MeshStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", url, err)
	}
	return &st, body, nil
}

func statusCommand() *cli.Command {
	return meshCommand("status", "show this peer's load, its mesh and its latest routing decisions",
		func(w io.Writer, st *node.MeshStatus) { printStatus(w, st) })
}

func peersCommand() *cli.Command {
	return meshCommand("peers", "list the peers this peer knows: RTT, load, cache digest",
		func(w io.Writer, st *node.MeshStatus) { printPeers(w, st.Peers) })
}

// meshCommand reads a peer's /v1/mesh and prints it with show (or raw
// with --json).
func meshCommand(name, usage string, show func(io.Writer, *node.MeshStatus)) *cli.Command {
	return &cli.Command{
		Name:  name,
		Usage: usage,
		Flags: statusFlags(),
		Action: func(c *cli.Context) error {
			st, raw, err := fetchMesh(c)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				_, err := os.Stdout.Write(raw)
				return err
			}
			show(os.Stdout, st)
			return nil
		},
	}
}

func printStatus(w io.Writer, st *node.MeshStatus) {
	l := st.Local
	fmt.Fprintf(w, "model      %s\n", st.Model)
	fmt.Fprintf(w, "local      %d active / %d slots, %d queued, prefill %.0f tok/s, decode %.0f tok/s\n",
		l.Active, l.Slots, l.QueueDepth, l.PrefillTokPerSec, l.DecodeTokPerSec)
	fmt.Fprintf(w, "peers      %d known\n", len(st.Peers))
	counts := map[string]int{}
	for _, d := range st.Recent {
		counts[string(d.Reason)]++
	}
	if len(st.Recent) > 0 {
		var parts []string
		for r, n := range counts {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
		fmt.Fprintf(w, "decisions  last %d: %s\n", len(st.Recent), strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	printPeers(w, st.Peers)
	if n := len(st.Recent); n > 0 {
		fmt.Fprintln(w, "\nrecent decisions (newest last):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tPROMPT\tDECISION\tSERVED BY\tCACHED est/real\tTOOK")
		for _, d := range st.Recent[max(0, n-10):] {
			by := "local"
			if d.ServedBy != "" {
				by = shortID(string(d.ServedBy))
			}
			if d.Continued {
				by += " (continued locally)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d/%d\t%.0f ms\n", d.Time.Format("15:04:05"), d.PromptTokens, d.Reason, by,
				d.EstimatedCached, d.RealizedCached, d.DurationMillis)
		}
		tw.Flush()
	}
}

func printPeers(w io.Writer, peers []node.PeerStatus) {
	if len(peers) == 0 {
		fmt.Fprintln(w, "no peers yet: start others with --bootstrap <one of this peer's addresses>")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tRTT\tLOAD\tPREFILL\tDIGEST\tSTATE")
	for _, p := range peers {
		rtt := "?"
		if p.RTTMillis != nil {
			rtt = fmt.Sprintf("%.2f ms", *p.RTTMillis)
		}
		load, prefill := "?", "?"
		if p.Load != nil {
			load = fmt.Sprintf("%d/%d active, %d queued", p.Load.Active, p.Load.Slots, p.Load.QueueDepth)
			prefill = fmt.Sprintf("%.0f tok/s", p.Load.PrefillTokPerSec)
		}
		digest := fmt.Sprintf("%d blocks", p.DigestBlocks)
		if p.DigestAgeMillis != nil {
			digest += fmt.Sprintf(", %.1fs old", *p.DigestAgeMillis/1000)
		}
		state := "ok"
		switch {
		case p.CooldownUntil != nil:
			state = "cooling down (" + p.CooldownReason + ")"
		case p.Load != nil && p.Load.PushBack:
			state = "push-back"
		case p.NeedsSnapshot:
			state = "resyncing digest"
		}
		if p.Relayed {
			state += ", relayed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", shortID(string(p.Peer)), rtt, load, prefill, digest, state)
	}
	tw.Flush()
}

// shortID abbreviates a peer ID the way libp2p's logs do.
func shortID(id string) string {
	if len(id) <= 14 {
		return id
	}
	return id[:6] + "…" + id[len(id)-6:]
}
