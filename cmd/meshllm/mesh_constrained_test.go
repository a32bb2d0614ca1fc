package main

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// TestMeshForwardsConstrained: a structured-output request and a forced
// tool call, forwarded to the peer holding their prefix, come back as
// valid as when served locally — the grammar travels with the request and
// the serving peer enforces it; the origin parses the tool call.
func TestMeshForwardsConstrained(t *testing.T) {
	boot, a, b := threePeers(t)
	all := []*proc{boot, a, b}
	_, entry := warmPrefix(t, all...)
	ctx := context.Background()
	forwarded := func(p *proc) float64 {
		return p.metric(t, `meshllm_router_decisions_total{reason="forwarded"}`)
	}

	// The router weighs measured speeds, noisy on a shared CPU: a request
	// may be served locally. Every reply must be valid; one forwarded
	// reply of each kind must be seen.
	schema := mustSchema(t, verdictSchema)
	var format map[string]any
	mustUnmarshal(t, verdictSchema, &format)
	seen := false
	for q := 1; q <= 5 && !seen; q++ {
		fwd := forwarded(entry)
		ce := openaiClient(entry)
		resp, err := ce.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "stories260K",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fiveShot(t, q))},
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "verdict", Schema: format, Strict: openai.Bool(true)},
			}},
			MaxTokens: openai.Int(64), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		satisfies(t, schema, resp.Choices[0].Message.Content)
		seen = forwarded(entry) > fwd && resp.Usage.PromptTokensDetails.CachedTokens > 500
	}
	if !seen {
		t.Fatal("no structured-output request was forwarded to the prefix holder in 5 tries")
	}

	// Tools: the generic tool format puts the tools in a system message, a
	// prefix of its own; warm it on some peer, then ask through another.
	toolReq := func(q int) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:      "stories260K",
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fiveShot(t, q))},
			Tools:      []openai.ChatCompletionToolUnionParam{weatherTool(t)},
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			MaxTokens:  openai.Int(160), Temperature: openai.Float(0), // stories260K spends about a token a character
		}
	}
	// Digest sizes before the tool request: its blocks may reach the
	// other peers before the request returns.
	before := map[[2]*proc]int{}
	for _, p := range all {
		for _, q := range all {
			if p != q {
				before[[2]*proc{p, q}] = p.digestBlocks(t, q)
			}
		}
	}
	ce := openaiClient(entry)
	if _, err := ce.Chat.Completions.New(ctx, toolReq(0)); err != nil {
		t.Fatal(err)
	}
	holder := lastServedBy(t, entry, all...)
	var via *proc
	for _, p := range all {
		if p != holder {
			via = p
			break
		}
	}
	base := before[[2]*proc{via, holder}]
	waitFor(t, "the tool prompt's digest to reach another peer", 30*time.Second, func() bool {
		return via.digestBlocks(t, holder) >= base+50
	})
	for q := 1; q <= 5; q++ {
		fwd := forwarded(via)
		cv := openaiClient(via)
		resp, err := cv.Chat.Completions.New(ctx, toolReq(q))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("finish_reason %q: %+v", resp.Choices[0].FinishReason, resp.Choices[0].Message)
		}
		checkWeatherCall(t, resp.Choices[0].Message.ToolCalls)
		if forwarded(via) > fwd {
			return
		}
	}
	t.Fatal("no tool-call request was forwarded to the prefix holder in 5 tries")
}
