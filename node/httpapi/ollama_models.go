package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

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
// expires_at is when Ollama would unload it (keep_alive after the last
// request; see keepAliveState); size_vram is 0, as the engine does not
// report what it offloaded.
func (s *Server) handlePS(w http.ResponseWriter, r *http.Request) {
	info := s.gen.Info()
	out := struct {
		Models []psModel `json:"models"`
	}{Models: []psModel{{Name: info.Name, Model: info.Name, Size: info.SizeBytes, Digest: info.ID,
		Details: s.details(), ExpiresAt: s.keep.expiresAt(s.now()), ContextLength: info.ContextLength}}}
	writeJSON(w, http.StatusOK, out)
}

// handleShow serves POST /api/show. model_info's "<arch>.context_length"
// is the context a request may use here (what clients plan prompts by);
// the model's trained context is under "meshllm.train_context_length".
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
	mi := map[string]any{
		"general.architecture":         arch,
		"general.parameter_count":      info.Parameters,
		arch + ".context_length":       info.ContextLength,
		"meshllm.context_length":       info.ContextLength,
		"meshllm.train_context_length": info.TrainContextLength,
		"meshllm.vocab_size":           info.VocabSize,
	}
	if info.EmbeddingLength > 0 {
		mi["meshllm.embedding_length"] = info.EmbeddingLength
	}
	writeJSON(w, http.StatusOK, showResponse{
		Parameters:   fmt.Sprintf("num_ctx %d", info.ContextLength),
		Template:     info.Template,
		Details:      s.details(),
		ModelInfo:    mi,
		Capabilities: s.capabilities(),
		ModifiedAt:   info.ModifiedAt,
	})
}

// capabilities lists what /api/show says the model can do, in Ollama's
// words: "completion" always, "tools" when its chat template has a tool
// format, "embedding" when the Generator serves embeddings.
func (s *Server) capabilities() []string {
	caps := []string{"completion"}
	if s.toolsSupported() {
		caps = append(caps, "tools")
	}
	if _, ok := s.embedder(); ok {
		caps = append(caps, "embedding")
	}
	return caps
}

// pullUnsupported is /api/pull's answer to every request.
const pullUnsupported = "pulling models is not supported: a meshllm peer cannot get models from the mesh or a registry yet. " +
	"Get the model with Ollama (ollama pull NAME) or download its GGUF file, then start the peer with it: " +
	"meshllm serve --model NAME-or-PATH"

// handlePull serves POST /api/pull with Ollama's error shape and 501, for
// any body, streamed or not: Ollama's client reads the status and the
// error line in both cases and shows the message. The body is not read.
func (s *Server) handlePull(w http.ResponseWriter, r *http.Request) {
	// Not writeError: a 5xx there is logged as a server failure.
	setOutcome(w, http.StatusNotImplemented)
	writeJSON(w, http.StatusNotImplemented, ollamaError{Error: pullUnsupported})
}
