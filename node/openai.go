package node

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// maxOpenAITemperature is OpenAI's documented ceiling.
const maxOpenAITemperature = 2

// handleChatCompletions serves POST /v1/chat/completions.
func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	j, e := s.chatJob(&req, start)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	s.serveOpenAI(w, r, j, true, req.Stream, req.StreamOptions)
}

// chatJob validates a chat request and renders and tokenizes its prompt.
func (s *Server) chatJob(req *chatRequest, start time.Time) (*job, *apiError) {
	model, e := s.openAICommon(req.Model, &req.openAISampling)
	if e != nil {
		return nil, e
	}
	if len(req.Messages) == 0 {
		return nil, missingField("messages")
	}
	if len(req.Tools) > 0 && !bytes.Equal(req.Tools, []byte("null")) && !bytes.Equal(req.Tools, []byte("[]")) {
		return nil, badRequest("tools", "tools (function calling) are not supported")
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, badRequest("response_format", "response_format %q is not supported: only \"text\"", rf.Type)
	}
	msgs := make([]infer.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		role := m.Role
		switch role {
		case "system", "user", "assistant":
		case "developer":
			role = "system"
		case "":
			return nil, badRequest("messages", "messages[%d].role is required", i)
		default:
			return nil, badRequest("messages", "messages[%d].role %q is not supported: use system, developer, user or assistant", i, m.Role)
		}
		if !m.Content.Set && role != "assistant" {
			return nil, badRequest("messages", "messages[%d].content is required", i)
		}
		msgs = append(msgs, infer.Message{Role: role, Content: m.Content.Text})
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
	text, err := s.gen.Render(msgs)
	if err != nil {
		return nil, classify(err, dialectOpenAI)
	}
	tokens, e := s.tokenize(text)
	if e != nil {
		return nil, e
	}
	j := &job{api: apiOpenAI, model: model, prompt: tokens, sampling: sampling, start: start}
	if e := s.checkPrompt(j, dialectOpenAI); e != nil {
		return nil, e
	}
	return j, nil
}

// handleCompletions serves POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	j, e := s.completionJob(&req, start)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	s.serveOpenAI(w, r, j, false, req.Stream, req.StreamOptions)
}

func (s *Server) completionJob(req *completionRequest, start time.Time) (*job, *apiError) {
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
	}
	p := req.openAISampling.params()
	p.MaxTokens, p.maxTokensName = req.MaxTokens, "max_tokens"
	sampling, e := s.sampling(p, s.gen.Info(), maxOpenAITemperature)
	if e != nil {
		return nil, e
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
	return j, nil
}

// openAICommon checks what both OpenAI generation requests share: the
// model, and the features that are refused.
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
	if lp := bytes.TrimSpace(o.Logprobs); len(lp) > 0 && !bytes.Equal(lp, []byte("null")) &&
		!bytes.Equal(lp, []byte("false")) && !bytes.Equal(lp, []byte("0")) {
		return "", badRequest("logprobs", "logprobs are not supported")
	}
	return model, nil
}

func (o *openAISampling) params() samplingParams {
	return samplingParams{
		Temperature: o.Temperature, TopP: o.TopP, TopK: o.TopK, MinP: o.MinP,
		RepeatPenalty: o.RepeatPenalty, RepeatLastN: o.RepeatLastN, Seed: o.Seed, Stop: o.Stop,
	}
}

// serveOpenAI runs j and answers in chat (chat=true) or text-completion
// shape, streamed or not.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, j *job, chat, stream bool, so *streamOptions) {
	id, created := s.newID("cmpl"), j.start.Unix()
	if chat {
		id = s.newID("chatcmpl")
	}
	if !stream {
		var text strings.Builder
		res, err := s.run(r.Context(), j, func(t string) error { text.WriteString(t); return nil })
		if err != nil {
			s.writeError(w, dialectOpenAI, classify(err, dialectOpenAI))
			return
		}
		u, tm := openAIUsage(res), openAITimings(res)
		if chat {
			writeJSON(w, http.StatusOK, chatCompletion{
				ID: id, Object: "chat.completion", Created: created, Model: j.model,
				Choices: []chatChoice{{Message: chatReply{Role: "assistant", Content: text.String()}, FinishReason: res.FinishReason}},
				Usage:   u, Timings: tm,
			})
			return
		}
		fr := res.FinishReason
		writeJSON(w, http.StatusOK, textCompletion{
			ID: id, Object: "text_completion", Created: created, Model: j.model,
			Choices: []textChoice{{Text: text.String(), FinishReason: &fr}},
			Usage:   &u, Timings: tm,
		})
		return
	}

	sw := newStreamWriter(w, true)
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	chunk := func(text *string, role string, finish *string) any {
		if chat {
			return chatChunk{ID: id, Object: object, Created: created, Model: j.model,
				Choices: []chatChunkChoice{{Delta: chatDelta{Role: role, Content: text}, FinishReason: finish}}}
		}
		t := ""
		if text != nil {
			t = *text
		}
		return textCompletion{ID: id, Object: object, Created: created, Model: j.model,
			Choices: []textChoice{{Text: t, FinishReason: finish}}}
	}
	first := true
	res, err := s.run(r.Context(), j, func(t string) error {
		role := ""
		if first && chat {
			role = "assistant"
		}
		first = false
		return sw.send(chunk(&t, role, nil))
	})
	if err != nil {
		s.streamError(w, sw, dialectOpenAI, err)
		return
	}
	fr, tm, u := res.FinishReason, openAITimings(res), openAIUsage(res)
	last := chunk(nil, "", &fr)
	if first && chat { // nothing was generated: still tell the role
		empty := ""
		last = chunk(&empty, "assistant", &fr)
	}
	switch c := last.(type) {
	case chatChunk:
		c.Timings = tm
		last = c
	case textCompletion:
		c.Timings = tm
		last = c
	}
	if err := sw.send(last); err != nil {
		setOutcome(w, statusClientClosed)
		return
	}
	if so != nil && so.IncludeUsage {
		var tail any = chatChunk{ID: id, Object: object, Created: created, Model: j.model, Choices: []chatChunkChoice{}, Usage: &u}
		if !chat {
			tail = textCompletion{ID: id, Object: object, Created: created, Model: j.model, Choices: []textChoice{}, Usage: &u}
		}
		if err := sw.send(tail); err != nil {
			setOutcome(w, statusClientClosed)
			return
		}
	}
	if err := sw.done(); err != nil {
		setOutcome(w, statusClientClosed)
	}
}

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
