package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/meshllm/meshllm/infer"
)

// renderGen is a fake engine whose Render also writes each message's tool
// calls (and the tools offered), and counts its calls, so tests see what a
// truncated chat kept and what truncating cost.
type renderGen struct {
	*fakeEngine
	mu      sync.Mutex
	renders int
	tools   []infer.Tool
	fail    func([]infer.Message) error // makes Render fail for some chats
}

func newRenderGen(ctxLen int) *renderGen {
	f := newFakeEngine()
	f.info.ContextLength = ctxLen
	return &renderGen{fakeEngine: f}
}

func (g *renderGen) Render(msgs []infer.Message, tools []infer.Tool) (string, error) {
	g.mu.Lock()
	g.renders++
	g.tools = tools
	fail := g.fail
	g.mu.Unlock()
	if fail != nil {
		if err := fail(msgs); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	for _, t := range tools {
		b.WriteString("<|tool " + t.Name + "|>")
	}
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|>" + m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString("<call " + c.Name + " " + string(c.Arguments) + ">")
		}
		b.WriteString("\n")
	}
	b.WriteString("<|assistant|>")
	return b.String(), nil
}

func (g *renderGen) renderCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.renders
}

// promptText turns the fake's tokens back into text.
func promptText(tokens []int32) string {
	var b strings.Builder
	for _, t := range tokens {
		if t >= 3 {
			b.WriteByte(byte(t - 3))
		}
	}
	return b.String()
}

// tokensOf is how many tokens g makes of msgs.
func tokensOf(t *testing.T, g Generator, msgs []infer.Message) int {
	t.Helper()
	text, err := g.Render(msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := g.Tokenize(text)
	return len(tok)
}

func msg(role, content string) infer.Message { return infer.Message{Role: role, Content: content} }

func callMsg(name string) infer.Message {
	return infer.Message{Role: "assistant", ToolCalls: []infer.ToolCall{{ID: "c1", Name: name, Arguments: json.RawMessage(`{"x":1}`)}}}
}

func TestTruncateChatTable(t *testing.T) {
	long := strings.Repeat("a", 100)
	sys, sys2 := msg("system", "S"), msg("system", "T")
	u := func(i int) infer.Message { return msg("user", fmt.Sprintf("u%d %s", i, long)) }
	a := func(i int) infer.Message { return msg("assistant", fmt.Sprintf("a%d %s", i, long)) }
	tool := func(i int) infer.Message {
		return infer.Message{Role: "tool", Content: fmt.Sprintf("t%d %s", i, long), Name: "f"}
	}
	last := msg("user", "last question")
	type tc struct {
		name    string
		msgs    []infer.Message
		keep    []infer.Message // what must remain, exactly; nil for an error
		reply   int
		slack   int  // context = tokens(keep) + reply + slack
		wantErr bool // then context = tokens(keep)
	}
	cases := []tc{
		{name: "fits", msgs: []infer.Message{sys, u(1), a(1), last}, keep: []infer.Message{sys, u(1), a(1), last}, reply: 10},
		{name: "fits with slack", msgs: []infer.Message{sys, u(1), a(1), last}, keep: []infer.Message{sys, u(1), a(1), last}, reply: 10, slack: 50},
		{name: "drops oldest", msgs: []infer.Message{sys, u(1), a(1), u(2), a(2), last}, keep: []infer.Message{sys, u(2), a(2), last}, reply: 10},
		{name: "drops one", msgs: []infer.Message{sys, u(1), a(1), u(2), a(2), last}, keep: []infer.Message{sys, a(1), u(2), a(2), last}, reply: 10, slack: 20},
		{name: "keeps every system message", msgs: []infer.Message{sys, u(1), sys2, a(1), u(2), last},
			keep: []infer.Message{sys, sys2, u(2), last}, reply: 10},
		{name: "no system", msgs: []infer.Message{u(1), a(1), u(2), a(2), last}, keep: []infer.Message{a(2), last}, reply: 5},
		{name: "tool call goes with its answers", msgs: []infer.Message{sys, u(1), callMsg("f"), tool(1), tool(2), u(2), a(2), last},
			keep: []infer.Message{sys, u(2), a(2), last}, reply: 10, slack: 150},
		{name: "last is a tool answer: its call stays", msgs: []infer.Message{sys, u(1), a(1), u(2), callMsg("f"), tool(1)},
			keep: []infer.Message{sys, callMsg("f"), tool(1)}, reply: 10},
		{name: "only the last fits, without reply room", msgs: []infer.Message{sys, u(1), a(1), last},
			keep: []infer.Message{sys, last}, reply: 10, slack: -9},
		{name: "last alone", msgs: []infer.Message{last}, keep: []infer.Message{last}, reply: 1},
		{name: "even the last does not fit", msgs: []infer.Message{sys, u(1), a(1), msg("user", long)},
			keep: []infer.Message{sys, msg("user", long)}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newRenderGen(4096)
			want := tokensOf(t, g, c.keep)
			room := chatRoom{Context: want + c.reply + c.slack, Reply: c.reply}
			if c.wantErr {
				room = chatRoom{Context: want, Reply: 1}
			}
			tokens, dropped, err := truncateChat(g, c.msgs, nil, room)
			if c.wantErr {
				var ce *infer.ContextError
				if !errors.As(err, &ce) || ce.ContextLength != want || ce.PromptTokens != want {
					t.Fatalf("want a context error for %d tokens, got %v", want, err)
				}
				if e := classify(err, dialectOllama); e.status != 400 {
					t.Errorf("status %d", e.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantText, _ := g.Render(c.keep, nil)
			if got := promptText(tokens); got != wantText {
				t.Errorf("kept\n%q\nwant\n%q", got, wantText)
			}
			if dropped != len(c.msgs)-len(c.keep) {
				t.Errorf("dropped %d, want %d", dropped, len(c.msgs)-len(c.keep))
			}
		})
	}
}

func TestTruncateChatMaxPrompt(t *testing.T) {
	g := newRenderGen(4096)
	msgs := []infer.Message{msg("user", strings.Repeat("x", 300)), msg("assistant", "ok"), msg("user", "short")}
	keep := tokensOf(t, g, msgs[2:])
	tokens, dropped, err := truncateChat(g, msgs, nil, chatRoom{Context: 4096, Reply: 10, MaxPrompt: keep})
	if err != nil || dropped != 2 || len(tokens) != keep {
		t.Fatalf("got %d tokens, %d dropped, %v", len(tokens), dropped, err)
	}
	_, _, err = truncateChat(g, msgs, nil, chatRoom{Context: 4096, Reply: 10, MaxPrompt: keep - 1})
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != 400 || !strings.Contains(ae.message, "at most") {
		t.Fatalf("over MaxPrompt: %v", err)
	}
}

// TestTruncateChatCost checks that a long chat costs O(log n) renders and
// that the binary search finds what a linear scan finds.
func TestTruncateChatCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 30 {
		n := 2 + rng.IntN(600)
		msgs := []infer.Message{msg("system", "sys")}
		for i := range n {
			role := []string{"user", "assistant"}[i%2]
			msgs = append(msgs, msg(role, strings.Repeat("w", 1+rng.IntN(80))))
		}
		g := newRenderGen(1 << 20)
		total := tokensOf(t, g, msgs)
		ctxLen := 30 + rng.IntN(total)
		room := chatRoom{Context: ctxLen, Reply: 1 + rng.IntN(20)}
		before := g.renderCount()
		tokens, dropped, err := truncateChat(g, msgs, nil, room)
		renders := g.renderCount() - before
		// Linear reference: the fewest dropped messages that fit.
		want, wantErr := -1, false
		for k := 0; k < len(msgs)-1; k++ {
			kept := append([]infer.Message{msgs[0]}, msgs[1+k:]...)
			if tokensOf(t, g, kept)+room.Reply <= room.Context {
				want = k
				break
			}
		}
		if want < 0 {
			want = len(msgs) - 2
			wantErr = tokensOf(t, g, []infer.Message{msgs[0], msgs[len(msgs)-1]}) >= room.Context
		}
		if wantErr != (err != nil) || (err == nil && dropped != want) {
			t.Fatalf("trial %d: n=%d ctx=%d: dropped %d (%d tokens), err %v; linear scan: %d, err %v",
				trial, n, ctxLen, dropped, len(tokens), err, want, wantErr)
		}
		if limit := 3 + bits.Len(uint(n)); renders > limit {
			t.Errorf("trial %d: %d renders for %d messages, want at most %d", trial, renders, n, limit)
		}
	}
}

func TestTruncateChatRenderErrors(t *testing.T) {
	g := newRenderGen(4096)
	boom := infer.BadRequestf("roles must alternate")
	msgs := []infer.Message{msg("user", strings.Repeat("a", 200)), msg("assistant", strings.Repeat("b", 200)), msg("user", "q")}
	// A template that refuses the full chat: its error, as it is.
	g.fail = func([]infer.Message) error { return boom }
	if _, _, err := truncateChat(g, msgs, nil, chatRoom{Context: 4096, Reply: 1}); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	// A template that refuses a history starting with "assistant": that
	// candidate does not fit, so one more message goes.
	g.fail = func(m []infer.Message) error {
		if m[0].Role == "assistant" {
			return boom
		}
		return nil
	}
	full := tokensOf(t, newRenderGen(4096), msgs)
	tokens, dropped, err := truncateChat(g, msgs, nil, chatRoom{Context: full - 150, Reply: 1})
	if err != nil || dropped != 2 || !strings.HasSuffix(promptText(tokens), "<|user|>q\n<|assistant|>") {
		t.Fatalf("dropped %d, %q, %v", dropped, promptText(tokens), err)
	}
}

func TestChatRoom(t *testing.T) {
	srv, err := NewServer(DefaultConfig(), newRenderGen(4096))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ numCtx, maxTokens, ctx, reply int }{
		{0, 0, 4096, defaultReplyRoom},
		{0, 100, 4096, 100},
		{0, 4096, 4096, 1024}, // a quarter of the context at most
		{2048, 0, 2048, 512},
		{100000, 0, 4096, defaultReplyRoom}, // num_ctx above the served context: clamped
		{2, 0, 2, 1},
	} {
		r := srv.chatRoom(c.numCtx, c.maxTokens)
		if r.Context != c.ctx || r.Reply != c.reply {
			t.Errorf("chatRoom(%d, %d) = %+v, want context %d reply %d", c.numCtx, c.maxTokens, r, c.ctx, c.reply)
		}
	}
}
