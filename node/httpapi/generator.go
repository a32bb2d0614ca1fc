package httpapi

import (
	"context"
	"strings"

	"github.com/meshllm/meshllm/infer"
)

// Generator is what the HTTP handlers serve requests with: an infer.Engine
// satisfies it as it is, and the mesh router will implement it to serve a
// request locally or on the peer with the longest cached prefix.
//
// Implementations must be safe for concurrent use. Generate follows
// infer.Engine.Generate: it blocks until the reply is complete, calls emit in
// order from one goroutine, stops when ctx is cancelled or emit fails, and
// returns errors that wrap infer's typed errors (ErrBusy, ErrBadRequest, ...).
type Generator interface {
	// Info describes the model served.
	Info() infer.ModelInfo
	// Tokenize turns text into the model's tokens (BOS added when wanted).
	Tokenize(text string) ([]int32, error)
	// Render applies the model's chat template to messages.
	Render(messages []infer.Message, tools []infer.Tool) (string, error)
	// Generate serves one request.
	Generate(ctx context.Context, req infer.Request, emit func(infer.Piece) error) (*infer.Result, error)
	// Stats reports load and cache occupancy (exported as gauges).
	Stats() infer.Stats
}

// compile-time check: an engine is a Generator.
var _ Generator = infer.Engine(nil)

// resolveModel maps the model name a client sent to the served model's
// name: the name itself, its ID, an alias, each with or without Ollama's
// ":latest" tag, compared without regard to case. ok is false for any other
// name.
func (s *Server) resolveModel(name string) (string, bool) {
	info := s.gen.Info()
	want := strings.TrimSpace(name)
	for _, cand := range []string{want, strings.TrimSuffix(want, ":latest")} {
		if cand == "" {
			continue
		}
		if strings.EqualFold(cand, info.Name) || (info.ID != "" && strings.EqualFold(cand, info.ID)) {
			return info.Name, true
		}
		for alias, target := range s.cfg.Aliases {
			if strings.EqualFold(cand, alias) && (strings.EqualFold(target, info.Name) || strings.EqualFold(target, info.ID)) {
				return alias, true
			}
		}
	}
	return "", false
}

// modelNames lists the names the server answers to: the model's name first,
// then its aliases in sorted order.
func (s *Server) modelNames() []string {
	info := s.gen.Info()
	names := []string{info.Name}
	for _, alias := range s.aliases {
		names = append(names, alias)
	}
	return names
}
