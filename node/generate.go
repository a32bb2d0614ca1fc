package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// errClientGone marks a failed write to a client that disconnected.
var errClientGone = errors.New("client disconnected")

// job is one generation on its way to the Generator.
type job struct {
	api      string // "openai" or "ollama", for metrics
	model    string // the name echoed to the client
	prompt   []int32
	sampling infer.Sampling
	start    time.Time // when the request arrived
}

// tokenize turns a rendered prompt into tokens and checks that they fit.
func (s *Server) tokenize(text string) ([]int32, *apiError) {
	tokens, err := s.gen.Tokenize(text)
	if err != nil {
		return nil, classify(fmt.Errorf("tokenizing the prompt: %w", err), dialectOpenAI)
	}
	return tokens, nil
}

// checkPrompt rejects a prompt that is empty, too long for the context or
// the configured limit, or not made of the model's tokens, before anything
// is queued or streamed.
func (s *Server) checkPrompt(j *job, d dialect) *apiError {
	info := s.gen.Info()
	if s.cfg.MaxPromptTokens > 0 && len(j.prompt) > s.cfg.MaxPromptTokens {
		return &apiError{status: 400, typ: typeInvalidRequest, code: "context_length_exceeded",
			message: fmt.Sprintf("prompt is %d tokens, but this server accepts at most %d: shorten the prompt", len(j.prompt), s.cfg.MaxPromptTokens)}
	}
	if err := infer.Validate(infer.Request{Prompt: j.prompt, Sampling: j.sampling}, info); err != nil {
		return classify(err, d)
	}
	return nil
}

// run serves j on the Generator, calling onText for every non-empty piece
// of text. It applies the request timeout and records TTFT and token
// counts.
func (s *Server) run(ctx context.Context, j *job, onText func(string) error) (*infer.Result, error) {
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	first := true
	res, err := s.gen.Generate(ctx, infer.Request{Prompt: j.prompt, Sampling: j.sampling}, func(p infer.Piece) error {
		if first && (p.Tokens > 0 || p.Text != "") {
			first = false
			s.metrics.ttft.WithLabelValues(j.api).Observe(s.now().Sub(j.start).Seconds())
		}
		if p.Text == "" {
			return nil
		}
		return onText(p.Text)
	})
	if err == nil && res == nil {
		err = fmt.Errorf("%w: generator returned no result", infer.ErrEngine)
	}
	if err != nil {
		// A cancelled context explains a failure better than what the
		// generator made of it (an emit error, an engine error).
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return nil, err
	}
	s.metrics.promptTokens.WithLabelValues(j.api).Add(float64(res.PromptTokens))
	s.metrics.cachedTokens.WithLabelValues(j.api).Add(float64(res.CachedTokens))
	s.metrics.generatedTokens.WithLabelValues(j.api).Add(float64(res.GeneratedTokens))
	return res, nil
}
