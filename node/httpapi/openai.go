package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// maxOpenAITemperature is OpenAI's documented ceiling.
const maxOpenAITemperature = 2

// maxLegacyLogprobs is the most alternatives /v1/completions' logprobs may
// ask for (OpenAI's limit for the legacy endpoint).
const maxLegacyLogprobs = 5

// openAIJob is a validated OpenAI generation request, ready to run: the
// job, and how its reply is shaped.
type openAIJob struct {
	*job
	chat   bool // chat.completion(.chunk) rather than text_completion
	stream bool
	so     *streamOptions
	// logprobs reports each token's logprobs (chat: logprobs=true;
	// completions: logprobs=N, in the legacy shape).
	logprobs bool
	// tools splits tool calls from the reply (nil: the reply is content).
	tools *toolPlan
}

// handleChatCompletions serves POST /v1/chat/completions.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	r, e := withForward(r, req.meshllmField) // where the prompt may go: the router reads it
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	oj, e := s.chatJob(&req, start)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	s.serveOpenAI(w, r, oj)
}

// chatJob validates a chat request, renders its messages (dropping the
// oldest ones when the chat does not fit the context) and tokenizes them.
func (s *Server) chatJob(req *chatRequest, start time.Time) (*openAIJob, *apiError) {
	model, e := s.openAICommon(req.Model, &req.openAISampling)
	if e != nil {
		return nil, e
	}
	if e := req.chatRefused.check(); e != nil {
		return nil, e
	}
	if len(req.Messages) == 0 {
		return nil, missingField("messages")
	}
	msgs, e := chatMessages(req.Messages)
	if e != nil {
		return nil, e
	}
	p := req.openAISampling.params()
	p.MaxTokens, p.maxTokensName = req.MaxTokens, "max_tokens"
	if req.MaxCompletionTokens != nil {
		p.MaxTokens, p.maxTokensName = req.MaxCompletionTokens, "max_completion_tokens"
	}
	info := s.gen.Info()
	sampling, e := s.sampling(p, info, maxOpenAITemperature)
	if e != nil {
		return nil, e
	}
	if sampling.Logprobs, sampling.TopLogprobs, e = chatLogprobsParams(req.Logprobs, req.TopLogprobs); e != nil {
		return nil, e
	}
	if sampling.Constraint, e = responseConstraint(req.ResponseFormat); e != nil {
		return nil, e
	}
	plan, e := s.chatToolPlan(req, &sampling)
	if e != nil {
		return nil, e
	}
	tokens, ctx, dropped, e := s.fitChat(msgs, plan.rendered(), 0, sampling, dialectOpenAI)
	if e != nil {
		return nil, messagesParam(e)
	}
	j := &job{api: apiOpenAI, model: model, prompt: tokens, sampling: sampling, start: start, context: ctx, truncated: dropped}
	if e := s.checkPrompt(j, dialectOpenAI); e != nil {
		return nil, e
	}
	return &openAIJob{job: j, chat: true, stream: req.Stream, so: req.StreamOptions, logprobs: sampling.Logprobs, tools: plan}, nil
}

// messagesParam names "messages" on a rendering error that names no
// parameter (the template refused a message).
func messagesParam(e *apiError) *apiError {
	if e.param == "" && e.status == http.StatusBadRequest {
		e.param = "messages"
	}
	return e
}

// chatMessages converts a chat's messages for the engine: developer
// becomes system, assistant tool calls get their arguments decoded, and
// each tool message gets the name of the function whose call it answers.
func chatMessages(in []chatMessage) ([]infer.Message, *apiError) {
	names := map[string]string{} // tool call ID -> function name
	out := make([]infer.Message, 0, len(in))
	for i, m := range in {
		msg := infer.Message{Role: m.Role, Content: m.Content.Text}
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			msg.Role = "system"
		case "":
			return nil, badRequest("messages", "messages[%d].role is required", i)
		default:
			return nil, badRequest("messages", "messages[%d].role %q is not supported: use system, developer, user, assistant or tool", i, m.Role)
		}
		if !m.Content.Set && msg.Role != "assistant" {
			return nil, badRequest("messages", "messages[%d].content is required", i)
		}
		if len(m.ToolCalls) > 0 {
			if msg.Role != "assistant" {
				return nil, badRequest("messages", "messages[%d].tool_calls: only assistant messages make tool calls", i)
			}
			calls, e := toolCallsIn(i, m.ToolCalls)
			if e != nil {
				return nil, e
			}
			for _, c := range calls {
				names[c.ID] = c.Name
			}
			msg.ToolCalls = calls
		}
		if msg.Role == "tool" {
			if m.ToolCallID == "" {
				return nil, badRequest("messages", "messages[%d].tool_call_id is required on a tool message", i)
			}
			msg.ToolCallID, msg.Name = m.ToolCallID, names[m.ToolCallID]
			if msg.Name == "" {
				msg.Name = m.Name
			}
		}
		out = append(out, msg)
	}
	return out, nil
}

// chatLogprobsParams checks chat's logprobs and top_logprobs.
func chatLogprobsParams(logprobs *bool, top *int) (bool, int, *apiError) {
	on := logprobs != nil && *logprobs
	if top == nil {
		return on, 0, nil
	}
	switch {
	case *top < 0 || *top > infer.MaxTopLogprobs:
		return false, 0, badRequest("top_logprobs", "top_logprobs must be between 0 and %d, got %d", infer.MaxTopLogprobs, *top)
	case *top > 0 && !on:
		return false, 0, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	}
	return on, *top, nil
}

// handleCompletions serves POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	r, e := withForward(r, req.meshllmField) // where the prompt may go: the router reads it
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	oj, e := s.completionJob(&req, start)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	s.serveOpenAI(w, r, oj)
}

func (s *Server) completionJob(req *completionRequest, start time.Time) (*openAIJob, *apiError) {
	model, e := s.openAICommon(req.Model, &req.openAISampling)
	if e != nil {
		return nil, e
	}
	switch {
	case !req.Prompt.Set:
		return nil, missingField("prompt")
	case req.Echo:
		return nil, badRequest("echo", "echo is not supported")
	case req.Suffix != nil && *req.Suffix != "":
		return nil, badRequest("suffix", "suffix (fill-in-the-middle) is not supported")
	case req.BestOf != nil && *req.BestOf != 1:
		return nil, badRequest("best_of", "best_of must be 1")
	case rawGiven(req.LogitBias):
		return nil, refusedLogitBias()
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxLegacyLogprobs):
		return nil, badRequest("logprobs", "logprobs must be between 0 and %d, got %d", maxLegacyLogprobs, *req.Logprobs)
	}
	p := req.openAISampling.params()
	p.MaxTokens, p.maxTokensName = req.MaxTokens, "max_tokens"
	sampling, e := s.sampling(p, s.gen.Info(), maxOpenAITemperature)
	if e != nil {
		return nil, e
	}
	if req.Logprobs != nil {
		sampling.Logprobs, sampling.TopLogprobs = true, *req.Logprobs
	}
	tokens := req.Prompt.Tokens
	if !req.Prompt.IsToks {
		if req.Prompt.Text == "" {
			return nil, badRequest("prompt", "prompt is empty")
		}
		if tokens, e = s.tokenize(req.Prompt.Text); e != nil {
			return nil, e
		}
	}
	j := &job{api: apiOpenAI, model: model, prompt: tokens, sampling: sampling, start: start}
	if e := s.checkPrompt(j, dialectOpenAI); e != nil {
		if e.param == "messages" {
			e.param = "prompt"
		}
		return nil, e
	}
	return &openAIJob{job: j, stream: req.Stream, so: req.StreamOptions, logprobs: sampling.Logprobs}, nil
}

// openAICommon checks what both OpenAI generation requests share: the
// model, and n.
func (s *Server) openAICommon(name string, o *openAISampling) (string, *apiError) {
	if name == "" {
		return "", missingField("model")
	}
	model, ok := s.resolveModel(name)
	if !ok {
		return "", modelNotFound(name)
	}
	if o.N != nil && *o.N != 1 {
		return "", badRequest("n", "n must be 1: one choice per request is supported")
	}
	if e := refuseSamplers(o.unsupportedSampling.fields()); e != nil {
		return "", e
	}
	return model, nil
}

func (o *openAISampling) params() samplingParams {
	return samplingParams{
		Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, MinP: o.MinP,
		RepeatPenalty: o.RepeatPenalty, RepeatLastN: o.RepeatLastN, Seed: o.Seed, Stop: o.Stop,
		PresencePenalty: o.PresencePenalty, FrequencyPenalty: o.FrequencyPenalty,
	}
}

// serveOpenAI runs oj and answers in chat or text-completion shape,
// streamed or not.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, oj *openAIJob) {
	if oj.truncated > 0 {
		w.Header().Set(headerTruncated, strconv.Itoa(oj.truncated))
	}
	if oj.stream {
		s.streamOpenAI(w, r, oj)
		return
	}
	rb := newReplyBuilder(oj)
	var content strings.Builder
	var lps []infer.TokenLogprob
	var calls []infer.ToolCall
	add := func(d replyDelta) {
		content.WriteString(d.content)
		lps = append(lps, d.logprobs...)
		calls = append(calls, d.calls...)
	}
	res, err := s.runPieces(r.Context(), oj.job, func(p infer.Piece) error { add(rb.piece(p)); return nil })
	if err != nil {
		s.writeError(w, dialectOpenAI, classify(err, dialectOpenAI))
		return
	}
	add(rb.finish())
	hdr := s.openAIHeader(oj)
	extras := meshExtras{Timings: openAITimings(res), TruncatedMessages: oj.truncated}
	u := openAIUsage(res)
	if !oj.chat {
		fr := res.FinishReason
		choice := textChoice{Text: content.String(), FinishReason: &fr}
		if oj.logprobs {
			choice.Logprobs = new(legacyOffsets).logprobs(lps)
		}
		writeJSON(w, http.StatusOK, textCompletion{ID: hdr.id, Object: "text_completion", Created: hdr.created, Model: oj.model,
			SystemFingerprint: hdr.fingerprint, Choices: []textChoice{choice}, Usage: &u, meshExtras: extras})
		return
	}
	reply := chatReply{Role: "assistant", ToolCalls: toolCallsOut(calls)}
	if text := content.String(); text != "" || len(calls) == 0 {
		reply.Content = &text
	}
	choice := chatChoice{Message: reply, FinishReason: finishReason(res, calls)}
	if oj.logprobs {
		choice.Logprobs = &chatLogprobs{Content: chatLogprobsOf(lps)}
	}
	writeJSON(w, http.StatusOK, chatCompletion{ID: hdr.id, Object: "chat.completion", Created: hdr.created, Model: oj.model,
		SystemFingerprint: hdr.fingerprint, Choices: []chatChoice{choice}, Usage: u, meshExtras: extras})
}

// finishReason is the reply's finish_reason: "tool_calls" when it made
// calls, else the engine's.
func finishReason(res *infer.Result, calls []infer.ToolCall) string {
	if len(calls) > 0 {
		return "tool_calls"
	}
	return res.FinishReason
}

// openAIHeader holds what every object and chunk of one answer repeats.
type openAIHeader struct {
	id          string
	created     int64
	fingerprint string
}

func (s *Server) openAIHeader(oj *openAIJob) openAIHeader {
	prefix := "cmpl"
	if oj.chat {
		prefix = "chatcmpl"
	}
	return openAIHeader{id: s.newID(prefix), created: oj.start.Unix(), fingerprint: s.systemFingerprint()}
}

// streamOpenAI runs oj and streams its reply as SSE chunks, OpenAI's way:
// content as it comes (the first chunk tells the role), each tool call as
// a chunk with its name and one with its arguments, then a chunk with the
// finish reason (and meshllm's timings), the usage chunk if asked for,
// and [DONE].
func (s *Server) streamOpenAI(w http.ResponseWriter, r *http.Request, oj *openAIJob) {
	hdr := s.openAIHeader(oj)
	sw := newStreamWriter(w, true)
	rb := newReplyBuilder(oj)
	lo := new(legacyOffsets)
	first := true // the role goes with the first chat chunk
	chatChunkOf := func(d chatDelta, finish *string) chatChunk {
		if first {
			d.Role, d.Refusal, first = "assistant", rawNull, false
		}
		return chatChunk{ID: hdr.id, Object: "chat.completion.chunk", Created: hdr.created, Model: oj.model,
			SystemFingerprint: hdr.fingerprint, Choices: []chatChunkChoice{{Delta: d, FinishReason: finish}}}
	}
	textChunkOf := func(c textChoice) textCompletion {
		return textCompletion{ID: hdr.id, Object: "text_completion", Created: hdr.created, Model: oj.model,
			SystemFingerprint: hdr.fingerprint, Choices: []textChoice{c}}
	}
	var calls []infer.ToolCall
	send := func(d replyDelta) error {
		if d.content != "" {
			var err error
			if oj.chat {
				text := d.content
				c := chatChunkOf(chatDelta{Content: &text}, nil)
				if oj.logprobs {
					c.Choices[0].Logprobs = &chatLogprobs{Content: chatLogprobsOf(d.logprobs)}
				}
				err = sw.send(c)
			} else {
				c := textChoice{Text: d.content}
				if oj.logprobs {
					c.Logprobs = lo.logprobs(d.logprobs)
				}
				err = sw.send(textChunkOf(c))
			}
			if err != nil {
				return err
			}
		}
		for i, tc := range toolCallsOut(d.calls) {
			index := len(calls)
			calls = append(calls, d.calls[i])
			name, args := tc, chatToolCall{Function: chatToolFunction{Arguments: tc.Function.Arguments}}
			name.Function.Arguments = ""
			for _, part := range []chatToolCall{name, args} {
				part.Index = &index
				if err := sw.send(chatChunkOf(chatDelta{ToolCalls: []chatToolCall{part}}, nil)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	res, err := s.runPieces(r.Context(), oj.job, func(p infer.Piece) error { return send(rb.piece(p)) })
	if err == nil {
		err = send(rb.finish())
	}
	if err != nil {
		s.streamError(w, sw, dialectOpenAI, err)
		return
	}
	fr, u := finishReason(res, calls), openAIUsage(res)
	extras := meshExtras{Timings: openAITimings(res), TruncatedMessages: oj.truncated}
	var last, tail any
	if oj.chat {
		d := chatDelta{}
		if first { // nothing was generated: still tell the role
			d.Content = new(string)
		}
		c := chatChunkOf(d, &fr)
		c.meshExtras = extras
		last = c
		tail = chatChunk{ID: hdr.id, Object: "chat.completion.chunk", Created: hdr.created, Model: oj.model,
			SystemFingerprint: hdr.fingerprint, Choices: []chatChunkChoice{}, Usage: &u}
	} else {
		c := textChunkOf(textChoice{FinishReason: &fr})
		c.meshExtras = extras
		last = c
		tail = textCompletion{ID: hdr.id, Object: "text_completion", Created: hdr.created, Model: oj.model,
			SystemFingerprint: hdr.fingerprint, Choices: []textChoice{}, Usage: &u}
	}
	if err := sw.send(last); err != nil {
		setOutcome(w, statusClientClosed)
		return
	}
	if oj.so != nil && oj.so.IncludeUsage {
		if err := sw.send(tail); err != nil {
			setOutcome(w, statusClientClosed)
			return
		}
	}
	if err := sw.done(); err != nil {
		setOutcome(w, statusClientClosed)
	}
}

// rawNull is a JSON null that survives omitempty.
var rawNull = []byte("null")

// streamError reports a generation error: with its status when nothing was
// streamed yet, otherwise as the stream's final event or line.
func (s *Server) streamError(w http.ResponseWriter, sw *streamWriter, d dialect, err error) {
	e := classify(err, d)
	if !sw.started {
		s.writeError(w, d, e)
		return
	}
	setOutcome(w, e.status)
	if e.status == statusClientClosed {
		return
	}
	s.log.Warn("streamed request failed", "status", e.status, "err", e.message)
	if d == dialectOpenAI {
		_ = sw.send(openAIErrorBody(e))
	} else {
		_ = sw.send(ollamaError{Error: e.message})
	}
}

func openAIUsage(res *infer.Result) usage {
	return usage{
		PromptTokens:        res.PromptTokens,
		CompletionTokens:    res.GeneratedTokens,
		TotalTokens:         res.PromptTokens + res.GeneratedTokens,
		PromptTokensDetails: promptDetails{CachedTokens: res.CachedTokens},
	}
}

func openAITimings(res *infer.Result) *timings {
	prefilled := res.PromptTokens - res.CachedTokens
	t := &timings{
		CacheN:             res.CachedTokens,
		PromptN:            prefilled,
		PromptMS:           ms(res.PrefillDuration),
		PromptPerSecond:    res.PrefillTokensPerSecond(),
		PredictedN:         res.GeneratedTokens,
		PredictedMS:        ms(res.DecodeDuration),
		PredictedPerSecond: res.DecodeTokensPerSecond(),
		QueueMS:            ms(res.QueueWait),
		TTFTMS:             ms(res.TimeToFirst),
	}
	if prefilled > 0 {
		t.PromptPerTokenMS = t.PromptMS / float64(prefilled)
	}
	if res.GeneratedTokens > 1 {
		t.PredictedPerTokenMS = t.PredictedMS / float64(res.GeneratedTokens-1)
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// handleModels serves GET /v1/models.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	list := modelList{Object: "list", Data: []modelObject{}}
	for _, name := range s.modelNames() {
		list.Data = append(list.Data, s.modelObject(name))
	}
	writeJSON(w, http.StatusOK, list)
}

// handleModel serves GET /v1/models/{id}.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	name, ok := s.resolveModel(id)
	if !ok {
		s.writeError(w, dialectOpenAI, modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(name))
}

func (s *Server) modelObject(name string) modelObject {
	info := s.gen.Info()
	var created int64
	if !info.ModifiedAt.IsZero() {
		created = info.ModifiedAt.Unix()
	}
	return modelObject{ID: name, Object: "model", Created: created, OwnedBy: "meshllm",
		ContextLength: info.ContextLength, Architecture: info.Architecture}
}

// decode reads and decodes a request body into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		return e
	}
	return decodeJSON(body, v)
}

// rawGiven reports whether an optional JSON value was given (not absent,
// null, "", [] or {}).
func rawGiven(raw []byte) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", `""`, "[]", "{}":
		return false
	}
	return true
}
