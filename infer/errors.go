package infer

import (
	"errors"
	"fmt"
)

// Errors an Engine returns. Callers test them with errors.Is; the HTTP layer
// maps each one to its API's status code and error shape.
var (
	// ErrBusy: the engine's queue is full; retry later or elsewhere.
	ErrBusy = errors.New("engine busy: request queue is full")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("engine closed")
	// ErrUnknownModel: no model of that name or path.
	ErrUnknownModel = errors.New("unknown model")
	// ErrBadRequest: the request is invalid (empty prompt, bad parameters).
	ErrBadRequest = errors.New("bad request")
	// ErrContextOverflow: the prompt does not fit the context.
	ErrContextOverflow = errors.New("prompt exceeds the context length")
	// ErrUnsupported: the engine cannot serve this kind of request (say,
	// embeddings from a peer started without an embedding model).
	ErrUnsupported = errors.New("not supported")
	// ErrEngine: the engine failed internally; the request was not served.
	ErrEngine = errors.New("engine failure")
)

// ContextError is returned (wrapping ErrContextOverflow) when a prompt is
// too long for the model's context.
type ContextError struct {
	PromptTokens  int
	ContextLength int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("prompt is %d tokens, but the context holds %d: shorten the prompt", e.PromptTokens, e.ContextLength)
}

// Unwrap lets errors.Is(err, ErrContextOverflow) match.
func (e *ContextError) Unwrap() error { return ErrContextOverflow }

// BadRequestf returns an error wrapping ErrBadRequest.
func BadRequestf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// Validate checks a request against an engine's model before it is queued.
func Validate(req Request, info ModelInfo) error {
	if len(req.Prompt) == 0 {
		return BadRequestf("empty prompt")
	}
	if len(req.Prompt) >= info.ContextLength {
		return &ContextError{PromptTokens: len(req.Prompt), ContextLength: info.ContextLength}
	}
	s := req.Sampling
	switch {
	case s.MaxTokens < 0:
		return BadRequestf("max_tokens must be >= 0, got %d", s.MaxTokens)
	case s.MaxTokens > info.ContextLength:
		return BadRequestf("max_tokens %d exceeds the context length %d", s.MaxTokens, info.ContextLength)
	case s.Temperature > 100:
		return BadRequestf("temperature %g out of range [0, 100]", s.Temperature)
	case s.TopP < 0 || s.TopP > 1:
		return BadRequestf("top_p %g out of range [0, 1]", s.TopP)
	case s.TopK < 0:
		return BadRequestf("top_k must be >= 0, got %d", s.TopK)
	case len(s.Stop) > 16:
		return BadRequestf("at most 16 stop strings, got %d", len(s.Stop))
	}
	if err := validateExtensions(s); err != nil {
		return err
	}
	for _, t := range req.Prompt {
		if t < 0 || (info.VocabSize > 0 && int(t) >= info.VocabSize) {
			return BadRequestf("token %d outside the vocabulary", t)
		}
	}
	return nil
}
