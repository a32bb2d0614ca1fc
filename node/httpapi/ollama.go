package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// ollamaModelRequired and friends are Ollama's own messages.
const ollamaModelRequired = "model is required"

func ollamaNotFound(name string) *apiError {
	e := modelNotFound(name)
	e.message = fmt.Sprintf("model %q not found, try pulling it first", name)
	return e
}

// ollamaModel checks and resolves a request's model.
func (s *Server) ollamaModel(name string) (string, *apiError) {
	if name == "" {
		return "", badRequest("model", ollamaModelRequired)
	}
	model, ok := s.resolveModel(name)
	if !ok {
		return "", ollamaNotFound(name)
	}
	return model, nil
}

// handleGenerate serves POST /api/generate.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req generateRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	r, e := withForward(r, req.meshllmField) // where the prompt may go: the router reads it
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	model, e := s.ollamaModel(req.Model)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	switch {
	case len(req.Images) > 0:
		e = badRequest("images", "images are not supported: this model reads text only")
	case req.Suffix != "":
		e = badRequest("suffix", "suffix (fill-in-the-middle) is not supported")
	case req.Template != "":
		e = badRequest("template", "custom templates are not supported: send raw=true with a rendered prompt instead")
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	constraint, e := ollamaFormat(req.Format)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if req.Prompt == "" && req.System == "" {
		// Ollama answers an empty prompt by loading the model (ours is
		// loaded already), or with keep_alive 0 by unloading it (ours
		// stays loaded: see keepAliveState).
		s.keep.touch(s.now(), keepAliveOf(req.KeepAlive))
		writeJSON(w, http.StatusOK, generateResponse{Model: model, CreatedAt: s.now().UTC(), Done: true, DoneReason: loadReason(req.KeepAlive)})
		return
	}
	j, e := s.ollamaJob(model, req.Options, req.ollamaExtras, constraint, req.KeepAlive, start)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if req.Raw {
		if j.prompt, e = s.tokenize(req.Prompt); e == nil {
			j.context = req.Options.numCtx
			e = s.checkPrompt(j, dialectOllama)
		}
	} else {
		var msgs []infer.Message
		if req.System != "" {
			msgs = append(msgs, infer.Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, infer.Message{Role: "user", Content: req.Prompt})
		e = s.ollamaFit(j, msgs, nil, req.Options.numCtx)
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	s.serveOllama(w, r, j, req.Stream, nil, func(text string, _ []ollamaToolCall, done bool) any {
		return generateResponse{Model: model, CreatedAt: s.now().UTC(), Response: text, Done: done}
	})
}

// loadReason is the done_reason of a request without a prompt: "unload"
// for keep_alive 0, else "load".
func loadReason(k *keepAlive) string {
	if unloads(k) {
		return "unload"
	}
	return "load"
}

// handleChat serves POST /api/chat.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req ollamaChatRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	r, e := withForward(r, req.meshllmField) // where the prompt may go: the router reads it
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	model, e := s.ollamaModel(req.Model)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	constraint, e := ollamaFormat(req.Format)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	tools, e := s.ollamaTools(model, req.Tools)
	if e == nil && constraint == nil {
		constraint, e = s.ollamaToolConstraint(tools)
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if len(req.Messages) == 0 {
		s.keep.touch(s.now(), keepAliveOf(req.KeepAlive))
		writeJSON(w, http.StatusOK, ollamaChatResponse{Model: model, CreatedAt: s.now().UTC(),
			Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: loadReason(req.KeepAlive)})
		return
	}
	msgs, e := ollamaMessages(req.Messages)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	j, e := s.ollamaJob(model, req.Options, req.ollamaExtras, constraint, req.KeepAlive, start)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if req.Truncate != nil && !*req.Truncate {
		// Ollama's truncate=false: the whole chat, or a 400.
		text, err := s.gen.Render(msgs, tools)
		if err != nil {
			s.writeError(w, dialectOllama, classify(err, dialectOllama))
			return
		}
		if j.prompt, e = s.tokenize(text); e == nil {
			j.context = req.Options.numCtx
			e = s.checkPrompt(j, dialectOllama)
		}
	} else {
		e = s.ollamaFit(j, msgs, tools, req.Options.numCtx)
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	w.Header().Set(headerTruncated, strconv.Itoa(j.truncated))
	s.serveOllama(w, r, j, req.Stream, s.ollamaReplyFilter(tools), func(text string, calls []ollamaToolCall, done bool) any {
		return ollamaChatResponse{Model: model, CreatedAt: s.now().UTC(),
			Message: ollamaMessage{Role: "assistant", Content: text, ToolCalls: calls}, Done: done}
	})
}

// ollamaMessages checks a chat's messages and converts them.
func ollamaMessages(in []ollamaMessage) ([]infer.Message, *apiError) {
	msgs := make([]infer.Message, 0, len(in))
	for i, m := range in {
		role := strings.ToLower(m.Role) // as Ollama's api.Message reads it
		switch role {
		case "system", "user", "assistant", "tool":
		case "":
			return nil, badRequest("messages", "messages[%d].role is required", i)
		default:
			return nil, badRequest("messages", "messages[%d].role %q is not supported: use system, user, assistant or tool", i, m.Role)
		}
		if len(m.Images) > 0 {
			return nil, badRequest("images", "images are not supported: this model reads text only")
		}
		if len(m.ToolCalls) > 0 && role != "assistant" {
			return nil, badRequest("messages", "messages[%d]: only assistant messages carry tool_calls", i)
		}
		calls, e := ollamaCallsIn(i, m.ToolCalls)
		if e != nil {
			return nil, e
		}
		msg := infer.Message{Role: role, Content: m.Content, ToolCalls: calls}
		if role == "tool" {
			msg.Name, msg.ToolCallID = m.ToolName, m.ToolCallID
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// ollamaFit sets j's prompt from a chat (truncated to fit, see fitChat)
// and checks it.
func (s *Server) ollamaFit(j *job, msgs []infer.Message, tools []infer.Tool, numCtx int) *apiError {
	tokens, ctx, dropped, e := s.fitChat(msgs, tools, numCtx, j.sampling, dialectOllama)
	if e != nil {
		return e
	}
	j.prompt, j.context, j.truncated = tokens, ctx, dropped
	return s.checkPrompt(j, dialectOllama)
}

// ollamaJob builds a job from Ollama's options, logprobs, format and
// keep_alive; the caller sets its prompt. think asking for a thinking mode
// is refused as Ollama refuses it for a model without one.
func (s *Server) ollamaJob(model string, opts ollamaOptions, x ollamaExtras, c *infer.Constraint, keep *keepAlive, start time.Time) (*job, *apiError) {
	switch t := string(bytes.TrimSpace(x.Think)); t {
	case "", "null", "false", `""`:
	case "true", `"low"`, `"medium"`, `"high"`, `"max"`:
		return nil, badRequest("think", "%q does not support thinking", model)
	default:
		return nil, badRequest("think", `think must be true, false, "low", "medium" or "high", got %.40s`, t)
	}
	if x.TopLogprobs < 0 || x.TopLogprobs > infer.MaxTopLogprobs {
		return nil, badRequest("top_logprobs", "top_logprobs must be between 0 and %d", infer.MaxTopLogprobs)
	}
	sampling, e := s.sampling(opts.p, s.gen.Info(), 100)
	if e != nil {
		return nil, e
	}
	sampling.Constraint = c
	if x.Logprobs { // as in Ollama, top_logprobs without logprobs asks for nothing
		sampling.Logprobs, sampling.TopLogprobs = true, x.TopLogprobs
	}
	return &job{api: apiOllama, model: model, sampling: sampling, start: start, keepAlive: keepAliveOf(keep)}, nil
}

// ollamaLogprobs converts the engine's logprobs to Ollama's shape.
func ollamaLogprobs(in []infer.TokenLogprob) []ollamaLogprob {
	if len(in) == 0 {
		return nil
	}
	out := make([]ollamaLogprob, len(in))
	for i, lp := range in {
		out[i].ollamaTokenLogprob = ollamaTokenLogprob{Token: lp.Token, Logprob: float64(lp.Logprob), Bytes: tokenBytes(lp.Token)}
		for _, t := range lp.Top {
			out[i].TopLogprobs = append(out[i].TopLogprobs, ollamaTokenLogprob{Token: t.Token, Logprob: float64(t.Logprob), Bytes: tokenBytes(t.Token)})
		}
	}
	return out
}

// withLogprobs sets a response line's logprobs.
func withLogprobs(v any, lps []infer.TokenLogprob) any {
	if len(lps) == 0 {
		return v
	}
	switch x := v.(type) {
	case generateResponse:
		x.Logprobs = ollamaLogprobs(lps)
		return x
	case ollamaChatResponse:
		x.Logprobs = ollamaLogprobs(lps)
		return x
	}
	return v
}

// ollamaFormat reads Ollama's format: absent, null or "" is none; "json"
// asks for any JSON object; a JSON object is a schema the reply must
// satisfy (checked as OpenAI's json_schema is: at most
// infer.MaxSchemaBytes, nesting bounded; the engine checks that it turns
// into a grammar). Anything else is a 400, as in Ollama.
func ollamaFormat(raw json.RawMessage) (*infer.Constraint, *apiError) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", `""`:
		return nil, nil
	case `"json"`:
		return &infer.Constraint{JSONSchema: jsonObjectSchema}, nil
	}
	if raw[0] != '{' {
		return nil, badRequest("format", `invalid format: %.100s; expected "json" or a JSON schema object`, raw)
	}
	return schemaConstraint(raw, "format", "format")
}

// serveOllama runs j and answers with NDJSON lines (stream unset or true)
// or one object. line builds a response line from content and tool calls;
// the last one gets done=true and the timing fields. filter (nil: none)
// splits the generated text into content and tool calls; streamed, the
// calls go out in a line of their own once the reply is complete, as
// Ollama sends them. Logprobs (when asked for) go with the line that shows
// their tokens' text, or the next one.
func (s *Server) serveOllama(w http.ResponseWriter, r *http.Request, j *job, stream *bool, filter replyFilter, line func(text string, calls []ollamaToolCall, done bool) any) {
	write := func(t string) string { return t }
	if filter != nil {
		write = filter.Write
	}
	var pending []infer.TokenLogprob
	take := func(v any) any {
		v = withLogprobs(v, pending)
		pending = nil
		return v
	}
	if stream != nil && !*stream {
		var text strings.Builder
		res, err := s.runPieces(r.Context(), j, func(p infer.Piece) error {
			pending = append(pending, p.Logprobs...)
			if p.Text != "" {
				text.WriteString(write(p.Text))
			}
			return nil
		})
		if err != nil {
			s.writeError(w, dialectOllama, classify(err, dialectOllama))
			return
		}
		var calls []ollamaToolCall
		if filter != nil {
			rest, tc := filter.Close()
			text.WriteString(rest)
			calls = s.ollamaCallsOut(0, tc)
		}
		writeJSON(w, http.StatusOK, s.ollamaFinal(take(line(text.String(), calls, true)), res, j))
		return
	}
	sw := newStreamWriter(w, false)
	res, err := s.runPieces(r.Context(), j, func(p infer.Piece) error {
		pending = append(pending, p.Logprobs...)
		if p.Text == "" {
			return nil
		}
		t := write(p.Text)
		if t == "" {
			return nil
		}
		return sw.send(take(line(t, nil, false)))
	})
	if err == nil && filter != nil {
		if rest, tc := filter.Close(); rest != "" || len(tc) > 0 {
			err = sw.send(take(line(rest, s.ollamaCallsOut(0, tc), false)))
		}
	}
	if err != nil {
		s.streamError(w, sw, dialectOllama, err)
		return
	}
	if err := sw.send(s.ollamaFinal(take(line("", nil, true)), res, j)); err != nil {
		setOutcome(w, statusClientClosed)
	}
}

// ollamaFinal fills the done line's reason and timings.
func (s *Server) ollamaFinal(v any, res *infer.Result, j *job) any {
	cached, truncated := res.CachedTokens, j.truncated
	m := ollamaMetrics{
		TotalDuration:      s.now().Sub(j.start),
		PromptEvalCount:    res.PromptTokens,
		PromptEvalDuration: res.PrefillDuration,
		EvalCount:          res.GeneratedTokens,
		EvalDuration:       res.DecodeDuration,
		CachedTokens:       &cached,
		TruncatedMessages:  &truncated,
		QueueDuration:      res.QueueWait,
	}
	switch x := v.(type) {
	case generateResponse:
		x.DoneReason, x.ollamaMetrics = res.FinishReason, m
		return x
	case ollamaChatResponse:
		x.DoneReason, x.ollamaMetrics = res.FinishReason, m
		return x
	}
	return v
}

// handleVersion serves GET /api/version.
func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
}

// handleRoot serves GET and HEAD / with a plain line, as Ollama does; a
// later dashboard replaces it for browsers.
func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		fmt.Fprintln(w, "meshllm is running (Ollama and OpenAI compatible API)")
	}
}

// handleHealthz serves GET /healthz: 200 with the model's name and the
// engine's load, never authenticated.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string      `json:"status"`
		Model  string      `json:"model"`
		Engine infer.Stats `json:"engine"`
	}{"ok", s.gen.Info().Name, s.gen.Stats()})
}
