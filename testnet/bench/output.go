package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as one JSON object:
// {"scenario": ..., "rows": [...]}.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a fixed-width table, one line per row.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tworkload\tskew\tpeers\tlink ms\tcache\tmean s\tp50 s\tp99 s\tTTFT s\tx local\thit\treq hit\tfwd\tmax share\tpeak win\tgossip B/s\tdecide us\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%g\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%.3f\t%.3f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t\n",
			x.Policy, x.Workload, x.Skew, x.Peers, x.LinkMS, x.CacheTokens, x.MeanLatency, x.P50Latency, x.P99Latency,
			x.MeanTTFT, ratio(x.VsLocal), x.HitRate, x.RequestHitRate, x.Forwarded, x.MaxShare, x.PeakWindowShare,
			x.GossipBytes, x.DecideMicros)
	}
	return tw.Flush()
}

func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

var csvHeader = []string{"policy", "workload", "skew", "peers", "link_ms", "cache_tokens", "requests",
	"mean_latency_s", "p50_latency_s", "p99_latency_s", "mean_ttft_s", "p50_ttft_s", "p99_ttft_s", "vs_local",
	"hit_rate", "request_hit_rate", "forwarded", "refusals", "max_share", "peak_window_share",
	"gossip_bytes_per_peer_s", "decide_us", "centralised", "virtual_s", "wall_s"}

// WriteCSV writes one line per row.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, x := range r.Rows {
		cw.Write([]string{x.Policy, x.Workload, x.Skew, strconv.Itoa(x.Peers), f(x.LinkMS), strconv.Itoa(x.CacheTokens),
			strconv.Itoa(x.Requests), f(x.MeanLatency), f(x.P50Latency), f(x.P99Latency), f(x.MeanTTFT), f(x.P50TTFT),
			f(x.P99TTFT), f(x.VsLocal), f(x.HitRate), f(x.RequestHitRate), f(x.Forwarded), strconv.Itoa(x.Refusals),
			f(x.MaxShare), f(x.PeakWindowShare), f(x.GossipBytes), f(x.DecideMicros), strconv.FormatBool(x.Centralised),
			f(x.VirtualSec), f(x.WallSec)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteSharesCSV writes every row's traffic share per window and peer.
func (r *Report) WriteSharesCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"policy", "skew", "peers", "link_ms", "cache_tokens", "window", "window_start_s", "peer", "share"})
	for _, x := range r.Rows {
		for wi, row := range x.Shares {
			for p, s := range row {
				cw.Write([]string{x.Policy, x.Skew, strconv.Itoa(x.Peers), strconv.FormatFloat(x.LinkMS, 'g', -1, 64),
					strconv.Itoa(x.CacheTokens), strconv.Itoa(wi), strconv.FormatFloat(float64(wi)*x.WindowSeconds, 'f', 2, 64),
					strconv.Itoa(p), strconv.FormatFloat(s, 'f', 4, 64)})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes a markdown report: the options, then one table per
// cell with every policy.
func (r *Report) WriteMarkdown(w io.Writer, command string) error {
	o := r.Options
	fmt.Fprintf(w, "# meshllm bench: scenario %s\n\n", r.Scenario)
	if command != "" {
		fmt.Fprintf(w, "    %s\n\n", command)
	}
	fmt.Fprintf(w, "Workload %s, %d requests, profile %s, engine runs %d at once, seed %d. Centralised policies (%s) decide with an exact, zero-lag view of every peer; `paper` and `meshllm` decide from gossip.\n\n",
		o.Workload, o.Requests, o.Profile.Name, o.Running, o.Seed, strings.Join(centralised(r.Rows), ", "))
	var last string
	for _, x := range r.Rows {
		key := fmt.Sprintf("%s, skew %s, %d peers, link %g ms one-way, cache %d tokens/peer", x.Workload, x.Skew, x.Peers, x.LinkMS, x.CacheTokens)
		if key != last {
			fmt.Fprintf(w, "\n### %s\n\n", key)
			fmt.Fprintln(w, "| policy | mean s | p50 s | p99 s | TTFT s | x local | hit (tok) | hit (req) | forwarded | max share | peak window share | gossip B/s/peer | decide µs |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
			last = key
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %.3f | %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.0f | %.1f |\n",
			x.Policy, x.MeanLatency, x.P50Latency, x.P99Latency, x.MeanTTFT, ratio(x.VsLocal), 100*x.HitRate,
			100*x.RequestHitRate, 100*x.Forwarded, 100*x.MaxShare, 100*x.PeakWindowShare, x.GossipBytes, x.DecideMicros)
	}
	return nil
}

func centralised(rows []Row) []string {
	var out []string
	for _, x := range rows {
		if x.Centralised && !slices.Contains(out, x.Policy) {
			out = append(out, x.Policy)
		}
	}
	return out
}

// WriteDir writes results.csv, shares.csv, report.md and the PNG plots
// into dir (created if needed) and returns the files written.
func (r *Report) WriteDir(dir, command string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		files = append(files, p)
		return f.Close()
	}
	if err := write("results.csv", r.WriteCSV); err != nil {
		return files, err
	}
	if err := write("shares.csv", r.WriteSharesCSV); err != nil {
		return files, err
	}
	if err := write("report.md", func(w io.Writer) error { return r.WriteMarkdown(w, command) }); err != nil {
		return files, err
	}
	for name, c := range r.Charts() {
		if err := write(name, c.WritePNG); err != nil {
			return files, err
		}
	}
	slices.Sort(files)
	return files, nil
}
