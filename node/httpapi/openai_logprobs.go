package httpapi

import (
	"github.com/meshllm/meshllm/infer"
)

// replyDelta is what one generated piece (or the end of the reply) adds to
// an OpenAI answer: content to show, the logprobs of the tokens that
// content is made of, and finished tool calls.
type replyDelta struct {
	content  string
	logprobs []infer.TokenLogprob
	calls    []infer.ToolCall
}

// replyBuilder turns the engine's pieces into replyDeltas: it splits tool
// calls from content (when the request offered tools) and holds each
// token's logprobs until the text it belongs to is shown, so logprobs
// always travel with their text. Logprobs whose text is never shown (a
// stop string, the text of a tool call) are dropped. A replyBuilder
// belongs to one request's goroutine.
type replyBuilder struct {
	plan    *toolPlan
	split   *infer.ToolStream // nil: all content
	pending []infer.TokenLogprob
}

func newReplyBuilder(oj *openAIJob) *replyBuilder {
	b := &replyBuilder{plan: oj.tools}
	if oj.tools != nil {
		b.split = oj.tools.stream()
	}
	return b
}

// piece takes the next piece the engine emitted.
func (b *replyBuilder) piece(p infer.Piece) replyDelta {
	b.pending = append(b.pending, p.Logprobs...)
	text := p.Text
	if b.split != nil && text != "" {
		text = b.split.Write(text)
	}
	return b.show(text)
}

// finish ends the reply: the content held back to the end, and the tool
// calls.
func (b *replyBuilder) finish() replyDelta {
	if b.split == nil {
		return replyDelta{}
	}
	text, calls := b.split.Close()
	d := b.show(text)
	d.calls = b.plan.limit(calls)
	return d
}

func (b *replyBuilder) show(text string) replyDelta {
	if text == "" {
		return replyDelta{}
	}
	d := replyDelta{content: text, logprobs: b.pending}
	b.pending = nil
	return d
}

// chatLogprobsOf converts logprobs to chat's logprobs.content entries
// (never nil, so an answer that asked for logprobs has a list).
func chatLogprobsOf(lps []infer.TokenLogprob) []chatTokenLogprob {
	out := make([]chatTokenLogprob, len(lps))
	for i, lp := range lps {
		out[i] = chatTokenLogprob{Token: lp.Token, Logprob: lp.Logprob, Bytes: tokenBytes(lp.Token),
			TopLogprobs: make([]chatTopLogprobs, len(lp.Top))}
		for k, t := range lp.Top {
			out[i].TopLogprobs[k] = chatTopLogprobs{Token: t.Token, Logprob: t.Logprob, Bytes: tokenBytes(t.Token)}
		}
	}
	return out
}

// tokenBytes is a token's text as OpenAI's "bytes": its UTF-8 bytes, which
// tell a token that holds part of a character apart from U+FFFD.
func tokenBytes(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// legacyOffsets builds /v1/completions' legacy logprobs, keeping the text
// offset across a stream's chunks. It belongs to one request.
type legacyOffsets struct {
	offset int // bytes of the choice's text before the next token
}

// logprobs converts the logprobs of the next tokens; text_offset counts
// bytes from the start of the choice's text (the prompt is not echoed).
func (l *legacyOffsets) logprobs(lps []infer.TokenLogprob) *textLogprobs {
	out := &textLogprobs{
		Tokens:        make([]string, len(lps)),
		TokenLogprobs: make([]float32, len(lps)),
		TopLogprobs:   make([]map[string]float32, len(lps)),
		TextOffset:    make([]int, len(lps)),
	}
	for i, lp := range lps {
		out.Tokens[i], out.TokenLogprobs[i], out.TextOffset[i] = lp.Token, lp.Logprob, l.offset
		top := make(map[string]float32, len(lp.Top))
		for _, t := range lp.Top {
			if _, dup := top[t.Token]; !dup { // most likely first: keep the first
				top[t.Token] = t.Logprob
			}
		}
		out.TopLogprobs[i] = top
		l.offset += len(lp.Token)
	}
	return out
}
