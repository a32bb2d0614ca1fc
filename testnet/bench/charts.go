package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Charts returns the report's plots by file name: mean latency against
// link latency per policy (one chart per skew and cache size, when links
// vary), hit rate per policy, and the traffic share of each peer over time
// under each gossiping or hash policy in the first cell.
func (r *Report) Charts() map[string]Chart {
	out := map[string]Chart{}
	type group struct {
		skew  string
		cache int
		peers int
	}
	groups := map[group][]Row{}
	var order []group
	for _, x := range r.Rows {
		g := group{x.Skew, x.CacheTokens, x.Peers}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], x)
	}
	for _, g := range order {
		rows := groups[g]
		links := map[float64]bool{}
		for _, x := range rows {
			links[x.LinkMS] = true
		}
		if len(links) < 2 {
			continue
		}
		c := Chart{Title: fmt.Sprintf("mean latency vs one-way link latency (%s, %d peers, cache %d)", g.skew, g.peers, g.cache),
			XLabel: "one-way link latency (ms, log)", YLabel: "mean latency (s)", LogX: true}
		h := Chart{Title: fmt.Sprintf("token hit rate vs link latency (%s, %d peers, cache %d)", g.skew, g.peers, g.cache),
			XLabel: "one-way link latency (ms, log)", YLabel: "token hit rate", LogX: true}
		for _, p := range policies(rows) {
			var s, hs Series
			s.Name, hs.Name = p, p
			for _, x := range rows {
				if x.Policy == p {
					s.X, s.Y = append(s.X, max(x.LinkMS, 0.1)), append(s.Y, x.MeanLatency)
					hs.X, hs.Y = append(hs.X, max(x.LinkMS, 0.1)), append(hs.Y, x.HitRate)
				}
			}
			c.Series, h.Series = append(c.Series, s), append(h.Series, hs)
		}
		out[fmt.Sprintf("latency-vs-link-%s-p%d-c%d.png", safe(g.skew), g.peers, g.cache)] = c
		out[fmt.Sprintf("hit-vs-link-%s-p%d-c%d.png", safe(g.skew), g.peers, g.cache)] = h
	}
	if len(r.Rows) == 0 {
		return out
	}
	// Hit rate per policy in every cell: one series per cell, x = policy index.
	hc := Chart{Title: "token hit rate per policy (x: " + strings.Join(policies(r.Rows), ", ") + ")", XLabel: "policy", YLabel: "token hit rate"}
	cells := map[string]*Series{}
	var cellOrder []string
	ps := policies(r.Rows)
	for _, x := range r.Rows {
		k := fmt.Sprintf("%s %gms c%d p%d", x.Skew, x.LinkMS, x.CacheTokens, x.Peers)
		if cells[k] == nil {
			cells[k] = &Series{Name: k}
			cellOrder = append(cellOrder, k)
		}
		cells[k].X = append(cells[k].X, float64(slices.Index(ps, x.Policy)))
		cells[k].Y = append(cells[k].Y, x.HitRate)
	}
	for _, k := range cellOrder {
		hc.Series = append(hc.Series, *cells[k])
	}
	if len(hc.Series) > 10 {
		hc.Series = hc.Series[:10]
	}
	out["hit-rate.png"] = hc
	// Traffic share over time in the first cell.
	first := r.Rows[0]
	for _, x := range r.Rows {
		if x.Skew != first.Skew || x.LinkMS != first.LinkMS || x.CacheTokens != first.CacheTokens || x.Peers != first.Peers || len(x.Shares) == 0 {
			continue
		}
		if x.Peers > 10 {
			continue
		}
		c := Chart{Title: fmt.Sprintf("traffic share per peer over time: %s (%s, %g ms, %d peers)", x.Policy, x.Skew, x.LinkMS, x.Peers),
			XLabel: "time (s)", YLabel: "share of requests"}
		for p := range x.Peers {
			s := Series{Name: fmt.Sprintf("peer %d", p)}
			for w, row := range x.Shares {
				s.X, s.Y = append(s.X, float64(w)*x.WindowSeconds), append(s.Y, row[p])
			}
			c.Series = append(c.Series, s)
		}
		out[fmt.Sprintf("share-%s.png", x.Policy)] = c
	}
	return out
}

func policies(rows []Row) []string {
	var out []string
	for _, x := range rows {
		if !slices.Contains(out, x.Policy) {
			out = append(out, x.Policy)
		}
	}
	return out
}

func safe(s string) string { return strings.NewReplacer(":", "", ".", "_").Replace(s) }
