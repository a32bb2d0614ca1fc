package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

// longChat is a chat of n turns of about 60 tokens each, then a last
// question.
func longChat(n int) []api.Message {
	msgs := []api.Message{{Role: "system", Content: "You are terse."}}
	for i := range n {
		msgs = append(msgs, api.Message{Role: "user", Content: fmt.Sprintf("question %d %s", i, strings.Repeat("q", 40))},
			api.Message{Role: "assistant", Content: fmt.Sprintf("answer %d %s", i, strings.Repeat("a", 40))})
	}
	return append(msgs, api.Message{Role: "user", Content: "LAST: and now?"})
}

func TestOllamaLongChatTruncated(t *testing.T) {
	_, eng, base := newTestServer(t) // a 512-token context
	client := ollamaClient(t, base)
	msgs := longChat(20) // ~2400 tokens
	var final api.ChatResponse
	var text strings.Builder
	err := client.Chat(context.Background(), &api.ChatRequest{Model: "stories260K", Messages: msgs,
		Options: map[string]any{"num_predict": 4096}}, func(r api.ChatResponse) error {
		text.WriteString(r.Message.Content)
		if r.Done {
			final = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req := eng.lastRequest()
	prompt := promptText(req.Prompt)
	if !strings.HasPrefix(prompt, "<|system|>You are terse.\n") || !strings.HasSuffix(prompt, "<|user|>LAST: and now?\n<|assistant|>") ||
		strings.Contains(prompt, "question 0 ") {
		t.Errorf("prompt kept the wrong messages:\n%s", prompt)
	}
	// num_predict 4096 in a 512 context: clamped to the room left; the
	// history kept leaves at least a quarter of the context for it.
	if room := 512 - len(req.Prompt); req.Sampling.MaxTokens != room || room < 128 {
		t.Errorf("max tokens %d, prompt %d tokens", req.Sampling.MaxTokens, len(req.Prompt))
	}
	if text.String() != fullReply || final.DoneReason != "stop" {
		t.Errorf("reply %q final %+v", text.String(), final)
	}

	// The raw wire reports how many messages went, on the done line and
	// in a header.
	body, _ := json.Marshal(api.ChatRequest{Model: "stories260K", Messages: msgs})
	status, hdr, out := post(t, base, "/api/chat", string(body))
	if status != 200 {
		t.Fatalf("%d %s", status, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var done struct {
		Done              bool `json:"done"`
		TruncatedMessages *int `json:"truncated_messages"`
	}
	mustJSON(t, []byte(lines[len(lines)-1]), &done)
	kept := strings.Count(promptText(eng.lastRequest().Prompt), "<|") - 1 // minus the assistant cue
	dropped := len(msgs) - kept
	if !done.Done || done.TruncatedMessages == nil || *done.TruncatedMessages != dropped || dropped < 30 {
		t.Errorf("done line %s: want %d dropped", lines[len(lines)-1], dropped)
	}
	if hdr.Get(headerTruncated) != strconv.Itoa(dropped) {
		t.Errorf("header %q, want %d", hdr.Get(headerTruncated), dropped)
	}

	// A chat that fits drops nothing, and says so.
	status, hdr, out = post(t, base, "/api/chat", `{"model":"stories260K","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	var short struct {
		TruncatedMessages *int `json:"truncated_messages"`
	}
	mustJSON(t, out, &short)
	if status != 200 || short.TruncatedMessages == nil || *short.TruncatedMessages != 0 || hdr.Get(headerTruncated) != "0" {
		t.Errorf("short chat: %d %s %q", status, out, hdr.Get(headerTruncated))
	}
}

func TestOllamaLastMessageTooLong(t *testing.T) {
	_, _, base := newTestServer(t)
	msgs := append(longChat(3), api.Message{Role: "user", Content: strings.Repeat("x", 600)})
	err := ollamaClient(t, base).Chat(context.Background(), &api.ChatRequest{Model: "stories260K", Messages: msgs},
		func(api.ChatResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "context holds 512") {
		t.Errorf("got %v", err)
	}
}

func TestOllamaNumCtxAndClamp(t *testing.T) {
	_, eng, base := newTestServer(t)
	client := ollamaClient(t, base)
	ctx := context.Background()
	gen := func(prompt string, opts map[string]any) api.GenerateResponse {
		t.Helper()
		var final api.GenerateResponse
		err := client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: prompt, Raw: true, Options: opts},
			func(r api.GenerateResponse) error {
				if r.Done {
					final = r
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return final
	}
	// A prompt that leaves 6 tokens: num_predict 100 is clamped, and the
	// reply ends with "length".
	p := strings.Repeat("p", 512-1-6)
	if r := gen(p, map[string]any{"num_predict": 100}); r.DoneReason != "length" || r.EvalCount != 6 || eng.lastRequest().Sampling.MaxTokens != 6 {
		t.Errorf("clamped: %+v, max tokens %d", r.Metrics, eng.lastRequest().Sampling.MaxTokens)
	}
	// num_ctx below the served context bounds prompt and reply.
	if r := gen(strings.Repeat("p", 120), map[string]any{"num_ctx": 128}); r.DoneReason != "length" || eng.lastRequest().Sampling.MaxTokens != 7 {
		t.Errorf("num_ctx 128: %+v, max tokens %d", r, eng.lastRequest().Sampling.MaxTokens)
	}
	// Above it: clamped to the served context, no error.
	if r := gen("hi", map[string]any{"num_ctx": 1 << 20}); r.DoneReason != "stop" || eng.lastRequest().Sampling.MaxTokens != 0 {
		t.Errorf("num_ctx above: %+v", r)
	}
	// A prompt longer than num_ctx is refused.
	err := client.Generate(ctx, &api.GenerateRequest{Model: "stories260K", Prompt: strings.Repeat("p", 200), Raw: true,
		Options: map[string]any{"num_ctx": 128}}, func(api.GenerateResponse) error { return nil })
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || !strings.Contains(se.ErrorMessage, "context holds 128") {
		t.Errorf("over num_ctx: %v", err)
	}
	// A chat under num_ctx is truncated to it.
	status, _, body := post(t, base, "/api/chat", chatBody(t, longChat(4), `"options":{"num_ctx":200}`))
	var done struct {
		TruncatedMessages *int `json:"truncated_messages"`
	}
	mustJSON(t, body, &done)
	if status != 200 || done.TruncatedMessages == nil || *done.TruncatedMessages == 0 || len(eng.lastRequest().Prompt) > 200-50 {
		t.Errorf("chat under num_ctx 200: %d %s (%d prompt tokens)", status, body, len(eng.lastRequest().Prompt))
	}
}

// chatBody is a non-streamed /api/chat body with msgs and extra fields.
func chatBody(t *testing.T, msgs []api.Message, extra string) string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return `{"model":"stories260K","stream":false,"messages":` + string(b) + `,` + extra + `}`
}
