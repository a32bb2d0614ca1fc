package cache

// Measurements behind docs/digests.md. They run only with MESHLLM_MEASURE=1
// (and need the MMLU data, ../../shared/data/mmlu or $MESHLLM_MMLU):
//
//	MESHLLM_MEASURE=1 go test ./cache -run TestMeasure -v -count=1
//
// cache/ may not import a tokenizer, so prompts are tokenized by approxTokens:
// a deterministic word-piece splitter of about 4 bytes per token. Its token
// counts are close to a BPE tokenizer's on English text; its token IDs are
// not any model's. Block-boundary effects and byte counts depend only on
// token counts and on which prefixes are shared, which it preserves.

import (
	"encoding/csv"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"
)

// approxTokens splits text into word pieces: a word (with its leading
// space) is cut into pieces of at most 4 bytes; every other character is a
// token of its own. IDs are FNV hashes of the pieces over a 32,000 vocab;
// token 1 (BOS) comes first.
func approxTokens(text string) []int32 {
	out := []int32{1}
	emit := func(piece string) {
		h := fnv.New32a()
		h.Write([]byte(piece))
		out = append(out, int32(3+h.Sum32()%32000))
	}
	rs := []rune(text)
	for i := 0; i < len(rs); {
		j := i
		if rs[j] == ' ' && j+1 < len(rs) && isWord(rs[j+1]) {
			j++
		}
		if !isWord(rs[j]) {
			emit(string(rs[i : j+1]))
			i = j + 1
			continue
		}
		for j < len(rs) && isWord(rs[j]) {
			j++
		}
		word := string(rs[i:j])
		for len(word) > 0 {
			n := min(4, len(word))
			emit(word[:n])
			word = word[n:]
		}
		i = j
	}
	return out
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

type mmluSubject struct {
	name    string
	prefix  string     // header and 5 dev examples
	queries [][]string // test rows
}

func mmluDir() string {
	if d := os.Getenv("MESHLLM_MMLU"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared", "data", "mmlu")
}

func readCSV(t testing.TB, path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("MMLU data: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows[1:]
}

func formatQuestion(row []string, withAnswer bool) string {
	var b strings.Builder
	b.WriteString(row[0])
	for i, c := range row[1:5] {
		fmt.Fprintf(&b, "\n%c. %s", 'A'+i, c)
	}
	b.WriteString("\nAnswer:")
	if withAnswer {
		fmt.Fprintf(&b, " %c\n\n", 'A'+(row[5][0]-'0'))
	}
	return b.String()
}

func loadMMLU(t testing.TB) []mmluSubject {
	dir := mmluDir()
	devs, _ := filepath.Glob(filepath.Join(dir, "dev", "*_dev.csv"))
	if len(devs) == 0 {
		t.Skipf("no MMLU data under %s", dir)
	}
	sort.Strings(devs)
	var subs []mmluSubject
	for _, dev := range devs {
		name := strings.TrimSuffix(filepath.Base(dev), "_dev.csv")
		var b strings.Builder
		fmt.Fprintf(&b, "The following are multiple choice questions (with answers) about %s.\n\n", strings.ReplaceAll(name, "_", " "))
		for _, row := range readCSV(t, dev) {
			b.WriteString(formatQuestion(row, true))
		}
		subs = append(subs, mmluSubject{name: name, prefix: b.String(),
			queries: readCSV(t, filepath.Join(dir, "test", name+"_test.csv"))})
	}
	return subs
}

// workload yields MMLU 5-shot prompts, subjects Zipf-distributed.
type workload struct {
	subs  []mmluSubject
	zipf  *rand.Zipf
	r     *rand.Rand
	cache map[[2]int][]int32
}

func newWorkload(subs []mmluSubject, seed uint64) *workload {
	r := rand.New(rand.NewPCG(seed, 1))
	return &workload{subs: subs, r: r, zipf: rand.NewZipf(r, 1.1, 1, uint64(len(subs)-1)), cache: map[[2]int][]int32{}}
}

func (w *workload) next() []int32 {
	s := int(w.zipf.Uint64())
	q := w.r.IntN(len(w.subs[s].queries))
	k := [2]int{s, q}
	if p, ok := w.cache[k]; ok {
		return p
	}
	p := approxTokens(w.subs[s].prefix + formatQuestion(w.subs[s].queries[q], false))
	w.cache[k] = p
	return p
}

// simConfig is one measured scenario: one peer serving a request stream,
// gossiping its digest to one observer that estimates every next request.
type simConfig struct {
	B        int
	Slots    int
	Capacity int // KV cells
	Cap      int // digest MaxBlocks; 0: unlimited
	Overflow Overflow
	Rate     float64       // requests per second
	Gossip   time.Duration // 0: a delta after every request
	Snapshot time.Duration // periodic snapshot interval
	Requests int
	GenTok   int // tokens generated per request
}

type simResult struct {
	trueTok, estTok, under, over float64 // sums over requests
	offBlock                     int     // requests whose estimate is off by >= B
	deltaBytes, snapBytes        int
	snapshots, deltas            int
	snapWords                    int     // hashes or filter words in all snapshots
	heldBlocks                   float64 // mean blocks held
	promptTok                    float64
	duration                     time.Duration
	n                            int
}

func simulate(t testing.TB, subs []mmluSubject, c simConfig) simResult {
	w := newWorkload(subs, 42)
	tr := NewTree(c.Slots, c.Capacity)
	maxBlocks := c.Cap
	if maxBlocks == 0 {
		maxBlocks = MaxHashes
	}
	src, err := NewSource(SourceConfig{Peer: "p", Model: "m", BlockSize: c.B, Epoch: 1, MaxBlocks: maxBlocks, Overflow: c.Overflow})
	if err != nil {
		t.Fatal(err)
	}
	rep := NewReplica("p", "m", c.B)
	var res simResult
	step := time.Duration(float64(time.Second) / c.Rate)
	var now, nextGossip, nextSnap time.Duration
	publish := func(d *Digest) {
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind == KindSnapshot {
			res.snapBytes += len(b)
			res.snapshots++
			res.snapWords += len(d.Hashes)
			if d.Filter != nil {
				res.snapWords += d.Filter.Words()
			}
		} else {
			res.deltaBytes += len(b)
			res.deltas++
		}
		if _, err := rep.Apply(d, int64(now)); err != nil {
			t.Fatal(err)
		}
	}
	var chain []Hash
	for i := 0; i < c.Requests; i++ {
		now += step
		if c.Gossip > 0 && now >= nextGossip {
			if d, ok := src.Update(tr); ok {
				publish(d)
			}
			nextGossip = now + c.Gossip
		}
		if now >= nextSnap {
			src.Update(tr)
			publish(src.Snapshot())
			nextSnap = now + c.Snapshot
		}
		prompt := w.next()
		chain = src.Hasher().Chain(chain[:0], prompt)
		truth := tr.MatchLen(prompt)
		est := rep.Match(chain) * c.B
		res.trueTok += float64(truth)
		res.estTok += float64(est)
		res.under += float64(max(0, truth-est))
		res.over += float64(max(0, est-truth))
		if est-truth >= c.B || truth-est >= c.B {
			res.offBlock++
		}
		res.promptTok += float64(len(prompt))
		// Serve: reuse the matched slot for the same subject, else an empty
		// or the least recently used one; then evict to capacity.
		n, h := tr.Match(prompt)
		if n < len(prompt)/2 || h < 0 {
			h = -1
			for s := range tr.Slots() {
				if tr.Len(Handle(s)) == 0 {
					h = Handle(s)
					break
				}
			}
			if h < 0 {
				h = tr.LRU()[0]
			}
		}
		seq := append(slices.Clone(prompt), make([]int32, c.GenTok)...)
		for j := range c.GenTok {
			seq[len(prompt)+j] = int32(w.r.IntN(32000))
		}
		tr.Set(h, seq, int64(now))
		if over := tr.Size() - tr.Capacity(); over > 0 {
			tr.Lock(h)
			for _, v := range tr.Victims(over) {
				tr.Clear(v)
			}
			tr.Unlock(h)
		}
		res.heldBlocks += float64(src.Advertised())
		if c.Gossip == 0 {
			if d, ok := src.Update(tr); ok {
				publish(d)
			}
		}
	}
	res.n = c.Requests
	res.duration = now
	res.heldBlocks /= float64(c.Requests)
	res.promptTok /= float64(c.Requests)
	return res
}

func (r simResult) recall() float64 { return r.estTok / math.Max(r.trueTok, 1) }

func measureEnabled(t *testing.T) []mmluSubject {
	if os.Getenv("MESHLLM_MEASURE") == "" {
		t.Skip("set MESHLLM_MEASURE=1 to run the digest measurements")
	}
	return loadMMLU(t)
}

func base() simConfig {
	return simConfig{B: DefaultBlockSize, Slots: 8, Capacity: 8 * 2048, Rate: 2, Gossip: time.Second,
		Snapshot: 30 * time.Second, Requests: 3000, GenTok: 8}
}

// TestMeasureBlockSize prints precision and gossip bytes as a function of B.
func TestMeasureBlockSize(t *testing.T) {
	subs := measureEnabled(t)
	fmt.Println("| B | mean prompt tok | mean true match | recall (est/true tokens) | mean tokens lost | snapshot bytes | bytes/advertised block | gossip B/s at 2 req/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, b := range []int{4, 8, 16, 32, 64, 128} {
		c := base()
		c.B, c.Gossip = b, 0
		r := simulate(t, subs, c)
		snap := float64(r.snapBytes) / float64(r.snapshots)
		fmt.Printf("| %d | %.0f | %.0f | %.3f | %.1f | %.0f | %.2f | %.0f |\n", b, r.promptTok, r.trueTok/float64(r.n),
			r.recall(), r.under/float64(r.n), snap, float64(r.snapBytes)/math.Max(float64(r.snapWords), 1),
			float64(r.deltaBytes+r.snapBytes)/r.duration.Seconds())
	}
}

// TestMeasureStaleness prints precision as a function of the gossip interval.
func TestMeasureStaleness(t *testing.T) {
	subs := measureEnabled(t)
	fmt.Println("| gossip interval | recall | overestimated tokens/req | requests off by >= 1 block | messages/s | gossip B/s |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, g := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
		c := base()
		c.Gossip = g
		r := simulate(t, subs, c)
		fmt.Printf("| %v | %.3f | %.1f | %.1f%% | %.2f | %.0f |\n", g, r.recall(), r.over/float64(r.n),
			100*float64(r.offBlock)/float64(r.n), float64(r.deltas+r.snapshots)/r.duration.Seconds(),
			float64(r.deltaBytes+r.snapBytes)/r.duration.Seconds())
	}
}

// TestMeasureCap prints precision as a function of the digest cap and the
// overflow policy, on a peer whose cache holds ~1,700 blocks.
func TestMeasureCap(t *testing.T) {
	subs := measureEnabled(t)
	fmt.Println("| cap (blocks) | policy | mean blocks held | recall | overestimated tokens/req | snapshot bytes |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, capBlocks := range []int{0, 1024, 512, 256, 128, 64} {
		for _, pol := range []Overflow{KeepRecent, UseBloom} {
			if capBlocks == 0 && pol == UseBloom {
				continue
			}
			c := base()
			c.Slots, c.Capacity, c.Gossip = 32, 32*1024, 0
			c.Cap, c.Overflow = capBlocks, pol
			r := simulate(t, subs, c)
			name := fmt.Sprint(capBlocks)
			if capBlocks == 0 {
				name = "none"
			}
			fmt.Printf("| %s | %v | %.0f | %.3f | %.1f | %.0f |\n", name, pol, r.heldBlocks, r.recall(),
				r.over/float64(r.n), float64(r.snapBytes)/float64(r.snapshots))
		}
	}
}
