package node

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/cache"
)

// TestRouterScripts runs the scenarios in testdata/router/*.txt: scripted
// meshes of peers, driven deterministically over Mesh and Decide in the
// style of etcd raft's interaction tests. The commands (one a line, # for
// comments):
//
//	policy KEY=VALUE...        before the first peer: min-saving, min-fraction,
//	                           unknown-rtt, max-fallbacks, threshold
//	segment NAME LEN           the text NAME is LEN tokens (default: names
//	                           starting with "subject" are 560 tokens, others 40)
//	local [slots=N] [prefill=Xtok/s] [decode=Xtok/s] [queue=N] [active=N] [holds=A,B+c]
//	peer ID [rtt=D] [slots=N] [prefill=Xtok/s] [decode=Xtok/s]
//	                           a peer joins and announces its load
//	rtt ID D|unknown           its link's measured RTT changes
//	relay ID                   its link is a circuit relay from now on
//	digest ID holds=A,B+c      its cache now holds these prompts; it
//	                           publishes the delta (lost after "lose ID")
//	snapshot ID                it answers a snapshot pull
//	lose ID                    its next digest is lost in transit
//	load ID [queue=N] [active=N] [pushback]   it announces its load
//	busy ID | fail ID | ok ID  a forward to it answered busy, failed, succeeded
//	cut ID                     its connection closes (PeerDown)
//	advance D                  time passes
//	expire                     the mesh drops silent peers
//	route PROMPT [max=N] -> forward ID [fallbacks=X,Y] [cached=N]
//	route PROMPT [max=N] -> local REASON [cached=N]
//	expect-snapshot ID...|none NeedSnapshots is exactly these
//	expect-peers ID...|none    the mesh knows exactly these peers
//
// A PROMPT is segment names joined by "+"; its tokens are the segments'
// tokens in order, so "subjectA+q1" and "subjectA+q2" share subjectA's.
func TestRouterScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/router/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptRTT struct {
	mu    sync.Mutex
	rtt   map[PeerID]time.Duration
	relay map[PeerID]bool
}

func (s *scriptRTT) RTT(p PeerID) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.rtt[p]
	return d, ok
}

func (s *scriptRTT) Relayed(p PeerID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relay[p]
}

type scriptPeer struct {
	tree *cache.Tree
	src  *cache.Source
	load Load
	lose bool
}

type script struct {
	t      *testing.T
	pos    string
	now    time.Time
	policy Policy
	mesh   *Mesh
	rtt    *scriptRTT
	peers  map[PeerID]*scriptPeer
	segs   map[string]int
	local  LocalView
	lholds [][]int32
}

const scriptModel = "script-model"

func runScript(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &script{t: t, now: t0, policy: DefaultPolicy(), peers: map[PeerID]*scriptPeer{}, segs: map[string]int{},
		rtt:   &scriptRTT{rtt: map[PeerID]time.Duration{}, relay: map[PeerID]bool{}},
		local: LocalView{Slots: 4, PrefillTokPerSec: tPrefill, DecodeTokPerSec: tDecode}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		s.pos = fmt.Sprintf("%s:%d: %s", filepath.Base(path), n, line)
		s.exec(strings.Fields(line))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func (s *script) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\n\t%s", s.pos, fmt.Sprintf(format, args...))
}

func (s *script) getMesh() *Mesh {
	if s.mesh == nil {
		m, err := NewMesh(MeshConfig{Self: "self", Model: scriptModel, RTT: s.rtt, Policy: s.policy})
		if err != nil {
			s.fatalf("%v", err)
		}
		s.mesh = m
	}
	return s.mesh
}

func (s *script) peer(id string) *scriptPeer {
	p, ok := s.peers[PeerID(id)]
	if !ok {
		s.fatalf("unknown peer %s", id)
	}
	return p
}

// tokens returns a prompt's tokens: its segments' tokens in order.
func (s *script) tokens(prompt string) []int32 {
	var out []int32
	for _, name := range strings.Split(prompt, "+") {
		n, ok := s.segs[name]
		if !ok {
			n = 40
			if strings.HasPrefix(name, "subject") {
				n = 560
			}
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		x := h.Sum64()
		for range n {
			x = x*6364136223846793005 + 1442695040888963407
			out = append(out, int32(3+(x>>33)%500))
		}
	}
	return out
}

func (s *script) exec(f []string) {
	cmd, args := f[0], f[1:]
	kv, flags := parseArgs(args)
	switch cmd {
	case "policy":
		if s.mesh != nil {
			s.fatalf("policy after the mesh started")
		}
		for k, v := range kv {
			switch k {
			case "min-saving":
				s.policy.MinSaving = s.dur(v)
			case "min-fraction":
				s.policy.MinSavingFraction = s.float(v)
			case "unknown-rtt":
				s.policy.UnknownRTT = s.dur(v)
			case "max-fallbacks":
				s.policy.MaxFallbacks = s.int(v)
			case "threshold":
				s.policy.BusyQueueThreshold = s.int(v)
			default:
				s.fatalf("unknown policy key %s", k)
			}
		}
	case "segment":
		s.segs[args[0]] = s.int(args[1])
	case "local":
		s.applyLoadArgs(kv, &s.local.Slots, &s.local.QueueDepth, &s.local.Active, &s.local.PrefillTokPerSec, &s.local.DecodeTokPerSec)
		if h, ok := kv["holds"]; ok {
			s.lholds = nil
			for _, p := range strings.Split(h, ",") {
				s.lholds = append(s.lholds, s.tokens(p))
			}
		}
	case "peer":
		id := PeerID(args[0])
		src, err := cache.NewSource(cache.SourceConfig{Peer: string(id), Model: scriptModel, Epoch: 1})
		if err != nil {
			s.fatalf("%v", err)
		}
		p := &scriptPeer{tree: cache.NewTree(8, 1<<16), src: src,
			load: Load{Slots: 4, PrefillTokPerSec: tPrefill, DecodeTokPerSec: tDecode}}
		s.peers[id] = p
		s.applyLoadArgs(kv, &p.load.Slots, &p.load.QueueDepth, &p.load.Active, &p.load.PrefillTokPerSec, &p.load.DecodeTokPerSec)
		if v, ok := kv["rtt"]; ok {
			s.setRTT(id, v)
		}
		s.getMesh()
		s.announce(id, p)
	case "rtt":
		s.setRTT(PeerID(args[0]), args[1])
	case "relay":
		s.rtt.mu.Lock()
		s.rtt.relay[PeerID(args[0])] = true
		s.rtt.mu.Unlock()
	case "digest":
		p := s.peer(args[0])
		for i := range p.tree.Slots() {
			p.tree.Clear(cache.Handle(i))
		}
		for i, name := range strings.Split(kv["holds"], ",") {
			if name != "" {
				p.tree.Set(cache.Handle(i), s.tokens(name), s.now.UnixNano())
			}
		}
		d, ok := p.src.Update(p.tree)
		if !ok {
			return
		}
		if p.lose {
			p.lose = false
			return
		}
		s.apply(args[0], d)
	case "snapshot":
		s.apply(args[0], s.peer(args[0]).src.Snapshot())
	case "lose":
		s.peer(args[0]).lose = true
	case "load":
		p := s.peer(args[0])
		s.applyLoadArgs(kv, &p.load.Slots, &p.load.QueueDepth, &p.load.Active, &p.load.PrefillTokPerSec, &p.load.DecodeTokPerSec)
		p.load.PushBack = flags["pushback"]
		s.announce(PeerID(args[0]), p)
	case "busy":
		s.getMesh().MarkBusy(PeerID(args[0]), s.now)
	case "fail":
		s.getMesh().MarkFailure(PeerID(args[0]), s.now)
	case "ok":
		s.getMesh().MarkSuccess(PeerID(args[0]))
	case "cut":
		s.getMesh().PeerDown(PeerID(args[0]))
		delete(s.peers, PeerID(args[0]))
	case "advance":
		s.now = s.now.Add(s.dur(args[0]))
	case "expire":
		s.getMesh().Expire(s.now)
	case "route":
		s.route(args)
	case "expect-snapshot":
		s.expectIDs(s.getMesh().NeedSnapshots(), args)
	case "expect-peers":
		var ids []PeerID
		for _, st := range s.getMesh().Peers(s.now) {
			ids = append(ids, st.Peer)
		}
		s.expectIDs(ids, args)
	default:
		s.fatalf("unknown command %q", cmd)
	}
}

func (s *script) expectIDs(got []PeerID, want []string) {
	var w []PeerID
	for _, id := range want {
		if id != "none" {
			w = append(w, PeerID(id))
		}
	}
	if !slices.Equal(got, w) {
		s.fatalf("got %v, want %v", got, w)
	}
}

func (s *script) apply(id string, d *cache.Digest) {
	if _, err := s.getMesh().ApplyDigest(PeerID(id), d, s.now); err != nil {
		s.fatalf("apply digest: %v", err)
	}
}

func (s *script) announce(id PeerID, p *scriptPeer) {
	p.load.Seq++
	s.getMesh().ApplyLoad(id, p.load, s.now)
}

func (s *script) setRTT(id PeerID, v string) {
	s.rtt.mu.Lock()
	defer s.rtt.mu.Unlock()
	if v == "unknown" {
		delete(s.rtt.rtt, id)
		return
	}
	s.rtt.rtt[id] = s.dur(v)
}

func (s *script) applyLoadArgs(kv map[string]string, slots, queue, active *int, prefill, decode *float64) {
	for k, v := range kv {
		switch k {
		case "slots":
			*slots = s.int(v)
		case "queue":
			*queue = s.int(v)
		case "active":
			*active = s.int(v)
		case "prefill":
			*prefill = s.float(strings.TrimSuffix(v, "tok/s"))
		case "decode":
			*decode = s.float(strings.TrimSuffix(v, "tok/s"))
		}
	}
}

func (s *script) route(args []string) {
	arrow := slices.Index(args, "->")
	if arrow < 1 || arrow == len(args)-1 {
		s.fatalf("route PROMPT [max=N] -> EXPECTATION")
	}
	prompt := s.tokens(args[0])
	kv, _ := parseArgs(args[1:arrow])
	r := Route{PromptTokens: len(prompt), MaxTokens: 1}
	if v, ok := kv["max"]; ok {
		r.MaxTokens = s.int(v)
	}
	local := s.local
	for _, h := range s.lholds {
		local.Cached = max(local.Cached, commonLen(h, prompt))
	}
	d := Decide(r, s.getMesh().View(prompt, local, s.now), s.policy)
	s.t.Logf("%s\n\t=> %v", s.pos, d)
	want := args[arrow+1:]
	wkv, _ := parseArgs(want[1:])
	switch want[0] {
	case "forward":
		if d.Local || string(d.Peer) != want[1] {
			s.fatalf("got %v, want forward to %s", d, want[1])
		}
		if fb, ok := wkv["fallbacks"]; ok {
			var w []PeerID
			for _, id := range strings.Split(fb, ",") {
				w = append(w, PeerID(id))
			}
			if !slices.Equal(d.Fallbacks, w) {
				s.fatalf("fallbacks %v, want %v", d.Fallbacks, w)
			}
		} else if len(d.Fallbacks) > 0 {
			s.fatalf("unexpected fallbacks %v", d.Fallbacks)
		}
	case "local":
		if !d.Local || string(d.Reason) != want[1] {
			s.fatalf("got %v, want local %s", d, want[1])
		}
	default:
		s.fatalf("expectation must be forward or local")
	}
	if c, ok := wkv["cached"]; ok && d.EstimatedCached != s.int(c) {
		s.fatalf("estimated cached %d, want %s", d.EstimatedCached, c)
	}
}

func parseArgs(args []string) (map[string]string, map[string]bool) {
	kv, flags := map[string]string{}, map[string]bool{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			flags[a] = true
		}
	}
	return kv, flags
}

func commonLen(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func (s *script) dur(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.fatalf("%v", err)
	}
	return d
}

func (s *script) int(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		s.fatalf("%v", err)
	}
	return n
}

func (s *script) float(v string) float64 {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		s.fatalf("%v", err)
	}
	return x
}
