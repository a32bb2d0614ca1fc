package httpapi

import "github.com/meshllm/meshllm/infer"

// Embeddings is what the embedding endpoints (/v1/embeddings, /api/embed,
// /api/embeddings) serve with: a model that tokenizes its own inputs and
// embeds them — the served model's engine, or a separate embedding model
// with a tokenizer of its own. Implementations are safe for concurrent
// use.
type Embeddings interface {
	// Info describes the embedding model (EmbeddingLength,
	// EmbedContextLength).
	Info() infer.ModelInfo
	// Tokenize turns an input text into the embedding model's tokens.
	Tokenize(text string) ([]int32, error)
	infer.Embedder
}

// WithEmbeddings serves the embedding endpoints with e (a separate
// embedding model, --embed-model) instead of the Generator. Without it
// they use the Generator when it is an infer.Embedder.
func WithEmbeddings(e Embeddings) Option {
	return func(s *Server) {
		if e != nil {
			s.emb = e
		}
	}
}

// embeddings returns what the embedding endpoints serve with, and false
// when this server has nothing that embeds.
func (s *Server) embeddings() (Embeddings, bool) {
	if s.emb != nil {
		return s.emb, true
	}
	if e, ok := s.gen.(Embeddings); ok {
		return e, true
	}
	return nil, false
}
