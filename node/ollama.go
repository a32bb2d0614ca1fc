package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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

// isSet reports whether an optional JSON value was given (not absent, null,
// "" or an empty array/object).
func isSet(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", `""`, "[]", "{}":
		return false
	}
	return true
}

// handleGenerate serves POST /api/generate.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req generateRequest
	if e := s.decode(w, r, &req); e != nil {
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
	case isSet(req.Format):
		e = badRequest("format", "format (structured output) is not supported")
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if req.Prompt == "" && req.System == "" {
		// Ollama answers an empty prompt by loading the model; ours is
		// loaded already.
		writeJSON(w, http.StatusOK, generateResponse{Model: model, CreatedAt: s.now().UTC(), Done: true, DoneReason: "load"})
		return
	}
	text := req.Prompt
	if !req.Raw {
		var msgs []infer.Message
		if req.System != "" {
			msgs = append(msgs, infer.Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, infer.Message{Role: "user", Content: req.Prompt})
		var err error
		if text, err = s.gen.Render(msgs); err != nil {
			s.writeError(w, dialectOllama, classify(err, dialectOllama))
			return
		}
	}
	j, e := s.ollamaJob(model, text, req.Options, start)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	s.serveOllama(w, r, j, req.Stream, func(text string, done bool) any {
		return generateResponse{Model: model, CreatedAt: s.now().UTC(), Response: text, Done: done}
	})
}

// handleChat serves POST /api/chat.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req ollamaChatRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	model, e := s.ollamaModel(req.Model)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	switch {
	case isSet(req.Tools):
		e = badRequest("tools", "%s does not support tools", model)
	case isSet(req.Format):
		e = badRequest("format", "format (structured output) is not supported")
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusOK, ollamaChatResponse{Model: model, CreatedAt: s.now().UTC(),
			Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	msgs := make([]infer.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		case "":
			s.writeError(w, dialectOllama, badRequest("messages", "messages[%d].role is required", i))
			return
		default:
			s.writeError(w, dialectOllama, badRequest("messages", "messages[%d].role %q is not supported: use system, user or assistant", i, m.Role))
			return
		}
		if len(m.Images) > 0 {
			s.writeError(w, dialectOllama, badRequest("images", "images are not supported: this model reads text only"))
			return
		}
		msgs = append(msgs, infer.Message{Role: m.Role, Content: m.Content})
	}
	text, err := s.gen.Render(msgs)
	if err != nil {
		s.writeError(w, dialectOllama, classify(err, dialectOllama))
		return
	}
	j, e := s.ollamaJob(model, text, req.Options, start)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	s.serveOllama(w, r, j, req.Stream, func(text string, done bool) any {
		return ollamaChatResponse{Model: model, CreatedAt: s.now().UTC(),
			Message: ollamaMessage{Role: "assistant", Content: text}, Done: done}
	})
}

// ollamaJob tokenizes a rendered prompt and checks it with its options.
func (s *Server) ollamaJob(model, text string, opts ollamaOptions, start time.Time) (*job, *apiError) {
	info := s.gen.Info()
	sampling, e := s.sampling(opts.p, info, 100)
	if e != nil {
		return nil, e
	}
	tokens, e := s.tokenize(text)
	if e != nil {
		return nil, e
	}
	j := &job{api: apiOllama, model: model, prompt: tokens, sampling: sampling, start: start}
	if e := s.checkPrompt(j, dialectOllama); e != nil {
		return nil, e
	}
	return j, nil
}

// serveOllama runs j and answers with NDJSON lines (stream unset or true)
// or one object. msg builds a response line; the last one gets done=true
// and the timing fields.
func (s *Server) serveOllama(w http.ResponseWriter, r *http.Request, j *job, stream *bool, msg func(text string, done bool) any) {
	if stream != nil && !*stream {
		var text strings.Builder
		res, err := s.run(r.Context(), j, func(t string) error { text.WriteString(t); return nil })
		if err != nil {
			s.writeError(w, dialectOllama, classify(err, dialectOllama))
			return
		}
		writeJSON(w, http.StatusOK, s.ollamaFinal(msg(text.String(), true), res, j))
		return
	}
	sw := newStreamWriter(w, false)
	res, err := s.run(r.Context(), j, func(t string) error { return sw.send(msg(t, false)) })
	if err != nil {
		s.streamError(w, sw, dialectOllama, err)
		return
	}
	if err := sw.send(s.ollamaFinal(msg("", true), res, j)); err != nil {
		setOutcome(w, statusClientClosed)
	}
}

// ollamaFinal fills the done line's reason and timings.
func (s *Server) ollamaFinal(v any, res *infer.Result, j *job) any {
	cached := res.CachedTokens
	m := ollamaMetrics{
		TotalDuration:      s.now().Sub(j.start),
		PromptEvalCount:    res.PromptTokens,
		PromptEvalDuration: res.PrefillDuration,
		EvalCount:          res.GeneratedTokens,
		EvalDuration:       res.DecodeDuration,
		CachedTokens:       &cached,
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

// details describes the model the way Ollama's tags do.
func (s *Server) details() modelDetails {
	info := s.gen.Info()
	d := modelDetails{Format: "gguf", Family: info.Architecture, ParameterSize: humanCount(info.Parameters),
		QuantizationLevel: info.Quantization}
	if info.Architecture != "" {
		d.Families = []string{info.Architecture}
	}
	return d
}

// humanCount writes a parameter count the way Ollama does ("260K", "494M",
// "1.2B").
func humanCount(n uint64) string {
	switch {
	case n == 0:
		return ""
	case n >= 1e9:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e9)) + "B"
	case n >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e6)) + "M"
	case n >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e3)) + "K"
	}
	return fmt.Sprint(n)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// handleTags serves GET /api/tags: the served model and its aliases.
func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	info := s.gen.Info()
	out := struct {
		Models []tagModel `json:"models"`
	}{Models: []tagModel{}}
	for _, name := range s.modelNames() {
		out.Models = append(out.Models, tagModel{Name: name, Model: name, ModifiedAt: info.ModifiedAt,
			Size: info.SizeBytes, Digest: info.ID, Details: s.details()})
	}
	writeJSON(w, http.StatusOK, out)
}

// handlePS serves GET /api/ps: the loaded model, which stays loaded.
func (s *Server) handlePS(w http.ResponseWriter, r *http.Request) {
	info := s.gen.Info()
	out := struct {
		Models []psModel `json:"models"`
	}{Models: []psModel{{Name: info.Name, Model: info.Name, Size: info.SizeBytes, Digest: info.ID,
		Details: s.details(), ContextLength: info.ContextLength}}}
	writeJSON(w, http.StatusOK, out)
}

// handleShow serves POST /api/show.
func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	var req showRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if _, e := s.ollamaModel(req.Model); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	info := s.gen.Info()
	arch := info.Architecture
	if arch == "" {
		arch = "unknown"
	}
	writeJSON(w, http.StatusOK, showResponse{
		Parameters: fmt.Sprintf("num_ctx %d", info.ContextLength),
		Template:   info.Template,
		Details:    s.details(),
		ModelInfo: map[string]any{
			"general.architecture":    arch,
			"general.parameter_count": info.Parameters,
			arch + ".context_length":  info.TrainContextLength,
			"meshllm.context_length":  info.ContextLength,
			"meshllm.vocab_size":      info.VocabSize,
		},
		Capabilities: []string{"completion"},
		ModifiedAt:   info.ModifiedAt,
	})
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
