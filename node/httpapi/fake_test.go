package httpapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// fakeEngine is a small deterministic Generator (and infer.Engine): bytes
// are tokens, the "KV cache" is the previous prompt, and the reply is a
// fixed list of pieces, one token each (the empty one is a token whose text
// the engine holds back). Hooks make it fail, block or wait.
type fakeEngine struct {
	info  infer.ModelInfo
	reply []string

	mu        sync.Mutex
	last      []int32 // the previous prompt: what the cache holds
	err       error   // returned by Generate before any piece
	failAfter int     // fail with ErrEngine after this many pieces (0: never)
	block     bool    // emit pieces until ctx is cancelled
	requests  []infer.Request
	served    int

	started   chan struct{} // receives once per Generate call, if non-nil
	cancelled chan error    // receives ctx's error when a blocked Generate stops

	embedded [][]int32 // the inputs of every Embed call, in order
	embedErr error     // returned by Embed

	renderedTools []infer.Tool    // the tools of the last Render call
	renderedMsgs  []infer.Message // the messages of the last Render call
}

const (
	fakeBOS        = 1
	fakeVocab      = 300
	fakeEmbedWidth = 8
)

func newFakeEngine() *fakeEngine {
	return &fakeEngine{
		info: infer.ModelInfo{
			Name: "stories260K", ID: "sha256:fake", Architecture: "llama", Parameters: 260_000,
			ContextLength: 512, TrainContextLength: 512, VocabSize: fakeVocab, Template: "plain",
			EmbeddingLength: fakeEmbedWidth, EmbedContextLength: 64, ToolFormat: string(infer.ToolFormatHermes),
			Quantization: "F32", SizeBytes: 1 << 20, ModifiedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		},
		reply: []string{"Once", " upon", "", " a", " time", " there", " was", " a", " fox", "."},
	}
}

func (f *fakeEngine) Info() infer.ModelInfo { return f.info }

func (f *fakeEngine) Tokenize(text string) ([]int32, error) {
	out := make([]int32, 0, len(text)+1)
	out = append(out, fakeBOS)
	for _, b := range []byte(text) {
		out = append(out, int32(b)+3)
	}
	return out, nil
}

func (f *fakeEngine) Render(msgs []infer.Message, tools []infer.Tool) (string, error) {
	f.mu.Lock()
	f.renderedTools, f.renderedMsgs = tools, msgs
	f.mu.Unlock()
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|>" + m.Content + "\n")
	}
	b.WriteString("<|assistant|>")
	return b.String(), nil
}

func (f *fakeEngine) CachedPrefix(tokens []int32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return commonPrefix(f.last, tokens)
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func (f *fakeEngine) Stats() infer.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return infer.Stats{Slots: 2, Active: 0, Queued: 3, QueueLimit: 8, CacheCells: len(f.last), CacheLimit: 1024, CachedSeqs: 1, ServedTotal: f.served}
}

func (f *fakeEngine) Close() error { return nil }

func (f *fakeEngine) lastRequest() infer.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func (f *fakeEngine) set(fn func(f *fakeEngine)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeEngine) Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error) {
	if err := infer.Validate(req, f.info); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	err, failAfter, block, started, cancelled, reply := f.err, f.failAfter, f.block, f.started, f.cancelled, f.reply
	cached := min(commonPrefix(f.last, req.Prompt), len(req.Prompt)-1)
	f.last = append([]int32(nil), req.Prompt...)
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if err != nil {
		return nil, err
	}
	res := &infer.Result{PromptTokens: len(req.Prompt), CachedTokens: cached, FinishReason: infer.FinishStop,
		QueueWait: time.Millisecond, PrefillDuration: time.Duration(len(req.Prompt)-cached) * 100 * time.Microsecond}
	res.TimeToFirst = res.QueueWait + res.PrefillDuration
	if block {
		for i := 0; ; i++ {
			if ctx.Err() != nil {
				if cancelled != nil {
					cancelled <- ctx.Err()
				}
				return nil, ctx.Err()
			}
			if err := emit(infer.Piece{Text: " tok", Tokens: 1}); err != nil {
				if cancelled != nil {
					<-ctx.Done() // the handler's context ends with the request
					cancelled <- ctx.Err()
				}
				return nil, err
			}
		}
	}
	var text strings.Builder
	for i, p := range reply {
		if failAfter > 0 && i == failAfter {
			return nil, infer.ErrEngine
		}
		if req.Sampling.MaxTokens > 0 && res.GeneratedTokens == req.Sampling.MaxTokens {
			res.FinishReason = infer.FinishLength
			break
		}
		res.GeneratedTokens++
		text.WriteString(p)
		var lps []infer.TokenLogprob
		if req.Sampling.Logprobs {
			lps = []infer.TokenLogprob{fakeLogprobs(i, p, req.Sampling.TopLogprobs)}
		}
		if stop := stopAt(text.String(), req.Sampling.Stop); stop >= 0 {
			// emit only what precedes the stop string.
			already := text.Len() - len(p)
			if stop > already {
				if err := emit(infer.Piece{Text: text.String()[already:stop], Tokens: 1, Logprobs: lps}); err != nil {
					return nil, err
				}
			}
			break
		}
		if err := emit(infer.Piece{Text: p, Tokens: 1, Logprobs: lps}); err != nil {
			return nil, err
		}
	}
	if res.GeneratedTokens > 1 {
		res.DecodeDuration = time.Duration(res.GeneratedTokens-1) * 10 * time.Millisecond
	}
	f.mu.Lock()
	f.served++
	f.mu.Unlock()
	return res, nil
}

func stopAt(text string, stops []string) int {
	at := -1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// fullReply is what the fake engine says when nothing stops it.
const fullReply = "Once upon a time there was a fox."

// newTestServer starts an httptest server over a fresh fake engine.
func newTestServer(t *testing.T, mod ...func(*Config)) (*Server, *fakeEngine, string) {
	t.Helper()
	eng := newFakeEngine()
	cfg := DefaultConfig()
	cfg.Aliases = map[string]string{"gpt-4o-mini": "stories260K"}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := NewServer(cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptestServer(t, srv.Handler())
	return srv, eng, hs
}

// Embed makes the fake an infer.Embedder: input i's vector has
// v[k] = sum over its tokens t of ((t+k) mod 7) - 3, L2-normalised, so
// different inputs get different, reproducible vectors.
func (f *fakeEngine) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	if err := infer.ValidateEmbed(inputs, f.info.EmbedContextLength, f.info.VocabSize); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.embedded = append(f.embedded, inputs...)
	err := f.embedErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		v := make([]float32, f.info.EmbeddingLength)
		for k := range v {
			for _, t := range in {
				v[k] += float32((int(t)+k)%7 - 3)
			}
		}
		out[i] = infer.Normalize(v)
	}
	return out, nil
}

// fakeLogprobs is what the fake reports for the i-th generated token when
// logprobs are asked for: the token's text at logprob -(i+1)/10, and top
// alternatives "alt0", "alt1", ... below it.
func fakeLogprobs(i int, text string, top int) infer.TokenLogprob {
	lp := infer.TokenLogprob{Token: text, Logprob: -float32(i+1) / 10}
	for k := range top {
		lp.Top = append(lp.Top, infer.TopLogprob{Token: fmt.Sprintf("alt%d", k), Logprob: lp.Logprob - float32(k+1)})
	}
	return lp
}

// hermesCalls is a reply in the fake's tool-call format (Hermes): the
// content, then one <tool_call> block per call, split into small pieces
// the way an engine streams them. calls alternate names and JSON
// arguments.
func hermesCalls(content string, calls ...string) []string {
	var text strings.Builder
	text.WriteString(content)
	for i := 0; i+1 < len(calls); i += 2 {
		fmt.Fprintf(&text, "<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", calls[i], calls[i+1])
	}
	var pieces []string
	for s := text.String(); s != ""; {
		n := min(len(s), 7)
		pieces, s = append(pieces, s[:n]), s[n:]
	}
	return pieces
}
