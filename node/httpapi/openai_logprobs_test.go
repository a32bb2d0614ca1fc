package httpapi

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// wantLogprobs is what the fake reports for its full reply with top
// alternatives: one entry per token ("" is the token whose text the engine
// held back), at -(i+1)/10.
func wantLogprobs(top int) string {
	var b strings.Builder
	for i, tok := range newFakeEngine().reply {
		fmt.Fprintf(&b, "%q@%.1f[", tok, -float64(i+1)/10)
		for k := range top {
			fmt.Fprintf(&b, "alt%d ", k)
		}
		b.WriteString("] ")
	}
	return b.String()
}

func describeLogprobs(t *testing.T, lps []openai.ChatCompletionTokenLogprob) string {
	t.Helper()
	var b strings.Builder
	for _, lp := range lps {
		if string(bytesOf(lp.Bytes)) != lp.Token {
			t.Errorf("token %q has bytes %v", lp.Token, lp.Bytes)
		}
		fmt.Fprintf(&b, "%q@%.1f[", lp.Token, lp.Logprob)
		for _, top := range lp.TopLogprobs {
			if top.Logprob >= lp.Logprob || string(bytesOf(top.Bytes)) != top.Token {
				t.Errorf("alternative %+v of %q", top, lp.Token)
			}
			fmt.Fprintf(&b, "%s ", top.Token)
		}
		b.WriteString("] ")
	}
	return b.String()
}

func bytesOf(v []int64) []byte {
	out := make([]byte, len(v))
	for i, x := range v {
		out[i] = byte(x)
	}
	return out
}

func TestOpenAIChatLogprobs(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if s := eng.lastRequest().Sampling; !s.Logprobs || s.TopLogprobs != 2 {
		t.Errorf("sampling logprobs %v top %d", s.Logprobs, s.TopLogprobs)
	}
	want := wantLogprobs(2)
	if got := describeLogprobs(t, resp.Choices[0].Logprobs.Content); got != want {
		t.Errorf("logprobs\n got %s\nwant %s", got, want)
	}

	// Streamed: each chunk carries the logprobs of its own text.
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var all []openai.ChatCompletionTokenLogprob
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			var text strings.Builder
			for _, lp := range ch.Logprobs.Content {
				text.WriteString(lp.Token)
			}
			if text.String() != ch.Delta.Content {
				t.Errorf("chunk %q carries logprobs of %q", ch.Delta.Content, text.String())
			}
			all = append(all, ch.Logprobs.Content...)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := describeLogprobs(t, all); got != want {
		t.Errorf("streamed logprobs\n got %s\nwant %s", got, want)
	}

	// Not asked for: none.
	resp, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "stories260K", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if raw := resp.Choices[0].JSON.Logprobs.Raw(); raw != "null" || eng.lastRequest().Sampling.Logprobs {
		t.Errorf("logprobs without asking: %s", raw)
	}
}

func TestOpenAICompletionLogprobs(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	params := openai.CompletionNewParams{
		Model: "stories260K", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
		Logprobs: openai.Int(3), MaxTokens: openai.Int(4),
	}
	resp, err := client.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if s := eng.lastRequest().Sampling; !s.Logprobs || s.TopLogprobs != 3 {
		t.Errorf("sampling logprobs %v top %d", s.Logprobs, s.TopLogprobs)
	}
	lp := resp.Choices[0].Logprobs
	if strings.Join(lp.Tokens, "|") != "Once| upon|| a" || fmt.Sprint(lp.TextOffset) != "[0 4 9 9]" {
		t.Errorf("tokens %q offsets %v", lp.Tokens, lp.TextOffset)
	}
	for i, v := range lp.TokenLogprobs {
		if math.Abs(v+float64(i+1)/10) > 1e-6 || len(lp.TopLogprobs[i]) != 3 {
			t.Errorf("token %d: logprob %v, top %v", i, v, lp.TopLogprobs[i])
		}
	}

	// Streamed, the offsets run on across chunks.
	stream := client.Completions.NewStreaming(context.Background(), params)
	var offsets []int64
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			offsets = append(offsets, ch.Logprobs.TextOffset...)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(offsets) != "[0 4 9 9]" {
		t.Errorf("streamed offsets %v", offsets)
	}
}
