package real

import (
	"strings"
	"testing"
)

func TestParseCounters(t *testing.T) {
	text := `# HELP meshllm_router_served_total Requests finished, by where.
# TYPE meshllm_router_served_total counter
meshllm_router_served_total{where="continued"} 2
meshllm_router_served_total{where="local"} 40
meshllm_router_served_total{where="peer"} 17
meshllm_router_forwarded_in_total{outcome="busy"} 3
meshllm_router_forwarded_in_total{outcome="served"} 11
meshllm_router_forwarded_in_total{outcome="error",note="a \"quoted, comma\""} 5
meshllm_router_served_total_other 99
meshllm_http_requests_total{code="200",path="/v1/completions"} 1e3 1700000000000
process_cpu_seconds_total 1.5
`
	c, err := ParseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Counters{Local: 40, Peer: 17, Continued: 2, ServedForOthers: 11}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if c.Entered() != 59 || c.Served() != 53 {
		t.Errorf("entered %g served %g", c.Entered(), c.Served())
	}
	if d := c.Sub(Counters{Local: 10, Peer: 7}); d.Local != 30 || d.Peer != 10 || d.ServedForOthers != 11 {
		t.Errorf("sub %+v", d)
	}
	for _, bad := range []string{"x{a=\"1\" 2\n", "novalue\n", "x{a=\"1\"} notanumber\n"} {
		if _, err := ParseCounters(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestWindowShares(t *testing.T) {
	s := func(a, b float64) []Counters { return []Counters{{Local: a}, {Local: b}} }
	samples := [][]Counters{s(0, 0), s(30, 10), s(31, 12), s(31, 12), s(40, 40)}
	shares, peak := windowShares(samples)
	if len(shares) != 4 {
		t.Fatalf("%d windows", len(shares))
	}
	if shares[0][0] != 0.75 || shares[0][1] != 0.25 || shares[2][0] != 0 || shares[3][1] != 28.0/37 {
		t.Errorf("shares %v", shares)
	}
	// Window 1 (3 requests) is too small to count; windows 0 and 3 count.
	if peak != 28.0/37 {
		t.Errorf("peak %g, want %g", peak, 28.0/37)
	}
}
