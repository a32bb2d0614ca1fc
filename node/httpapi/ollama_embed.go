package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// embedder returns what the embedding endpoints serve with (see
// Server.embeddings), if it has an embedding width. Without one, they
// answer errNoEmbeddings (501).
func (s *Server) embedder() (Embeddings, bool) {
	e, ok := s.embeddings()
	return e, ok && e.Info().EmbeddingLength > 0
}

// ollamaEmbedContext is the longest input Embed accepts.
func ollamaEmbedContext(info infer.ModelInfo) int {
	if info.EmbedContextLength > 0 {
		return info.EmbedContextLength
	}
	return info.ContextLength
}

// ollamaEmbedTokens tokenizes inputs with emb's tokenizer. An input longer
// than the embedding context is cut to it when truncate is set, else
// refused; it returns the tokens and their total count (at most
// maxEmbedTokens).
func ollamaEmbedTokens(emb Embeddings, inputs []string, truncate bool) ([][]int32, int, *apiError) {
	if len(inputs) > infer.MaxEmbedInputs {
		return nil, 0, badRequest("input", "%d inputs to embed, at most %d", len(inputs), infer.MaxEmbedInputs)
	}
	limit := ollamaEmbedContext(emb.Info())
	out := make([][]int32, len(inputs))
	total := 0
	for i, in := range inputs {
		tokens, err := emb.Tokenize(in)
		if err != nil {
			return nil, 0, classify(fmt.Errorf("tokenizing input %d: %w", i, err), dialectOllama)
		}
		switch {
		case len(tokens) == 0:
			return nil, 0, badRequest("input", "input %d is empty after tokenizing", i)
		case len(tokens) > limit && !truncate:
			e := badRequest("input", "input %d is %d tokens, but the embedding context holds %d: shorten it, or leave truncate unset (true) to cut it", i, len(tokens), limit)
			e.code = "context_length_exceeded"
			return nil, 0, e
		case len(tokens) > limit:
			tokens = tokens[:limit]
		}
		out[i] = tokens
		if total += len(tokens); total > maxEmbedTokens {
			return nil, 0, badRequest("input", "the inputs hold more than %d tokens: send fewer in one request", maxEmbedTokens)
		}
	}
	return out, total, nil
}

// ollamaEmbed runs one batched Embed call under the request timeout.
func (s *Server) ollamaEmbed(ctx context.Context, emb Embeddings, tokens [][]int32) ([][]float32, *apiError) {
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	vecs, err := emb.Embed(ctx, tokens)
	if err == nil && len(vecs) != len(tokens) {
		err = infer.ErrEngine
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		if errors.Is(err, infer.ErrUnsupported) {
			return nil, s.errNoEmbeddings()
		}
		return nil, classify(err, dialectOllama)
	}
	return vecs, nil
}

// handleOllamaEmbed serves POST /api/embed: one vector per input, batched in one
// Embed call, L2-normalised (again after cutting them to dimensions).
func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req ollamaEmbedRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	model, e := s.ollamaModel(req.Model)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	emb, ok := s.embedder()
	switch {
	case !ok:
		e = s.errNoEmbeddings()
	case req.Dimensions < 0:
		e = badRequest("dimensions", "dimensions must be >= 0, got %d", req.Dimensions)
	}
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	defer func() { s.keep.touch(s.now(), keepAliveOf(req.KeepAlive)) }()
	if len(req.Input) == 0 {
		// No input loads the model, as in Ollama.
		writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: model, Embeddings: [][]float32{}})
		return
	}
	tokens, total, e := ollamaEmbedTokens(emb, req.Input, req.Truncate == nil || *req.Truncate)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	vecs, e := s.ollamaEmbed(r.Context(), emb, tokens)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if d := req.Dimensions; d > 0 {
		for i, v := range vecs {
			if d < len(v) {
				vecs[i] = infer.Normalize(v[:d:d])
			}
		}
	}
	writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: model, Embeddings: vecs,
		TotalDuration: max(s.now().Sub(start), time.Nanosecond), PromptEvalCount: total})
}

// handleOllamaEmbeddings serves the legacy POST /api/embeddings: one prompt, one
// vector of float64s. A prompt longer than the embedding context is cut to
// it; an empty prompt loads the model (an empty vector), as in Ollama.
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req ollamaEmbeddingsRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	if _, e := s.ollamaModel(req.Model); e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	emb, ok := s.embedder()
	if !ok {
		s.writeError(w, dialectOllama, s.errNoEmbeddings())
		return
	}
	defer func() { s.keep.touch(s.now(), keepAliveOf(req.KeepAlive)) }()
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, ollamaEmbeddingsResponse{Embedding: []float64{}})
		return
	}
	tokens, _, e := ollamaEmbedTokens(emb, []string{req.Prompt}, true)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	vecs, e := s.ollamaEmbed(r.Context(), emb, tokens)
	if e != nil {
		s.writeError(w, dialectOllama, e)
		return
	}
	out := make([]float64, len(vecs[0]))
	for i, x := range vecs[0] {
		out[i] = float64(x)
	}
	writeJSON(w, http.StatusOK, ollamaEmbeddingsResponse{Embedding: out})
}
