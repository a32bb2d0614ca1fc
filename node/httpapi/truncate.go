package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/meshllm/meshllm/infer"
)

// headerTruncated carries, on a chat answer, how many of the request's
// messages were dropped to make the prompt fit the context (both dialects).
const headerTruncated = "X-Meshllm-Truncated-Messages"

// defaultReplyRoom is the room truncateChat keeps free for a reply that
// sets no max_tokens / num_predict; chatRoom caps it (and any max_tokens)
// at a quarter of the context, so the history keeps the larger share.
const defaultReplyRoom = 1024

// chatRoom is how much of the context one chat request may use.
type chatRoom struct {
	// Context is the tokens the prompt and the reply share: the served
	// context, or the smaller num_ctx the request asked for.
	Context int
	// Reply is the room truncateChat keeps free for the reply while it
	// drops messages. A prompt that fits only without it is still served,
	// with the reply clamped to what is left.
	Reply int
	// MaxPrompt caps the prompt's tokens (Config.MaxPromptTokens); 0 for
	// none.
	MaxPrompt int
}

// requestContext is the context a request may use: numCtx when it is set
// (> 0) and within the served context, else the served context (larger
// values are clamped to it, as Ollama clamps num_ctx to what it can load).
func requestContext(info infer.ModelInfo, numCtx int) int {
	if numCtx > 0 && numCtx < info.ContextLength {
		return numCtx
	}
	return info.ContextLength
}

// chatRoom computes the room of a chat request that asked for numCtx (0:
// the served context) and a reply of maxTokens (0: unset).
func (s *Server) chatRoom(numCtx, maxTokens int) chatRoom {
	ctx := requestContext(s.gen.Info(), numCtx)
	reply := defaultReplyRoom
	if maxTokens > 0 {
		reply = maxTokens
	}
	reply = max(1, min(reply, ctx/4))
	return chatRoom{Context: ctx, Reply: reply, MaxPrompt: s.cfg.MaxPromptTokens}
}

// fits reports whether a prompt of n tokens leaves the reply its room.
func (r chatRoom) fits(n int) bool {
	return n+r.Reply <= r.Context && r.allowed(n)
}

// allowed reports whether a prompt of n tokens can be served at all: one
// token of the context left for the reply, and within MaxPrompt.
func (r chatRoom) allowed(n int) bool {
	return n < r.Context && (r.MaxPrompt == 0 || n <= r.MaxPrompt)
}

// tooLong is the error for a prompt of n tokens that is not allowed.
func (r chatRoom) tooLong(n int) error {
	if r.MaxPrompt > 0 && n > r.MaxPrompt {
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "messages", code: "context_length_exceeded",
			message: fmt.Sprintf("prompt is %d tokens, but this server accepts at most %d: shorten the prompt", n, r.MaxPrompt)}
	}
	return &infer.ContextError{PromptTokens: n, ContextLength: r.Context}
}

// truncateChat renders and tokenizes msgs (with tools) on gen and, while
// the prompt does not leave room.Reply tokens of room.Context free, drops
// the oldest messages the way Ollama does: every system message and the
// last message stay, and an assistant message with tool calls goes
// together with the tool answers that follow it. It returns the prompt's
// tokens and how many messages were dropped. When even the system messages
// with the last message leave no room, the shortest prompt is still
// returned if it leaves one token free (the reply is clamped later);
// otherwise the error is an *infer.ContextError (or an *apiError naming
// Config.MaxPromptTokens), which classify turns into a 400.
//
// Each candidate costs one render and one tokenize, linear in the prompt:
// the drop count is found by binary search (the prompt shrinks as more
// messages go), so a long chat costs O(log n) of them, and a chat that fits
// costs one. A render error on the full chat is returned as it is; on a
// truncated one (a template that refuses the shortened history) it counts
// as not fitting. truncateChat keeps no state and is safe to call
// concurrently if gen is.
func truncateChat(gen Generator, msgs []infer.Message, tools []infer.Tool, room chatRoom) ([]int32, int, error) {
	if len(msgs) == 0 {
		return nil, 0, infer.BadRequestf("no messages")
	}
	groups := droppable(msgs)
	render := func(k int) ([]int32, error) {
		text, err := gen.Render(keepAfter(msgs, groups, k), tools)
		if err != nil {
			return nil, err
		}
		tokens, err := gen.Tokenize(text)
		if err != nil {
			return nil, fmt.Errorf("tokenizing the prompt: %w", err)
		}
		return tokens, nil
	}
	full, err := render(0)
	var tooManyBytes *promptBytesError
	switch {
	case errors.As(err, &tooManyBytes) && len(groups) > 0:
		// Too long to tokenize (see boundedTokenizer): it does not fit,
		// so truncate.
	case err != nil:
		return nil, 0, err
	case room.fits(len(full)) || len(groups) == 0:
		if !room.allowed(len(full)) {
			return nil, 0, room.tooLong(len(full))
		}
		return full, 0, nil
	}
	// The shortest candidate first: if it does not fit, nothing does.
	k := len(groups)
	best, err := render(k)
	if err != nil {
		return nil, 0, err
	}
	if !room.fits(len(best)) {
		if !room.allowed(len(best)) {
			return nil, 0, room.tooLong(len(best))
		}
		return best, dropCount(groups, k), nil
	}
	// Invariant: hi fits; every k < lo does not.
	lo, hi := 1, k
	for lo < hi {
		mid := lo + (hi-lo)/2
		tokens, err := render(mid)
		if err == nil && room.fits(len(tokens)) {
			hi, best = mid, tokens
		} else {
			lo = mid + 1
		}
	}
	return best, dropCount(groups, hi), nil
}

// droppable splits the messages before the last one into the groups
// truncateChat drops, oldest first: each non-system message on its own,
// except that an assistant message with tool calls takes the tool messages
// right after it along. A group that would reach the last message is not
// droppable. Each group is a [start, end) range of msgs.
func droppable(msgs []infer.Message) [][2]int {
	last := len(msgs) - 1
	var groups [][2]int
	for i := 0; i < last; {
		if msgs[i].Role == "system" {
			i++
			continue
		}
		end := i + 1
		if msgs[i].Role == "assistant" && len(msgs[i].ToolCalls) > 0 {
			for end < len(msgs) && msgs[end].Role == "tool" {
				end++
			}
		}
		if end > last {
			break
		}
		groups = append(groups, [2]int{i, end})
		i = end
	}
	return groups
}

// keepAfter returns msgs without the first k groups.
func keepAfter(msgs []infer.Message, groups [][2]int, k int) []infer.Message {
	if k == 0 {
		return msgs
	}
	out := make([]infer.Message, 0, len(msgs))
	next := 0
	for _, g := range groups[:k] {
		out = append(out, msgs[next:g[0]]...)
		next = g[1]
	}
	return append(out, msgs[next:]...)
}

// dropCount is how many messages the first k groups hold.
func dropCount(groups [][2]int, k int) int {
	n := 0
	for _, g := range groups[:k] {
		n += g[1] - g[0]
	}
	return n
}

// fitChat renders msgs for a chat request, truncating the history to the
// room numCtx (0: the served context) and sampling.MaxTokens leave (see
// truncateChat). It returns the prompt, the context the request may use
// (store it in job.context, so that checkPrompt clamps the reply to the
// room left) and how many messages were dropped (job.truncated); d picks
// the error shape. Both dialects' chat handlers call it, then checkPrompt.
func (s *Server) fitChat(msgs []infer.Message, tools []infer.Tool, numCtx int, sampling infer.Sampling, d dialect) (tokens []int32, ctx, dropped int, e *apiError) {
	room := s.chatRoom(numCtx, sampling.MaxTokens)
	// Candidates longer in bytes than room.Context can hold are not
	// tokenized (Config.MaxPromptBytesPerToken).
	tokens, dropped, err := truncateChat(boundedTokenizer{Generator: s.gen, s: s, ctx: room.Context}, msgs, tools, room)
	if err != nil {
		return nil, 0, 0, classify(err, d)
	}
	return tokens, room.Context, dropped, nil
}
