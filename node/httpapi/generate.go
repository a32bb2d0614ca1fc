package httpapi

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
	// context is the context the request may use (a num_ctx below the
	// served one); 0 means the served context. checkPrompt clamps the
	// reply and repeat_last_n to it.
	context int
	// truncated is how many chat messages fitChat dropped.
	truncated int
	// keepAlive is the request's keep_alive (nil: the default), which
	// runPieces applies when the request ends (see keepAliveState).
	keepAlive *time.Duration
}

// tokenize turns a rendered prompt into tokens. A prompt too long in bytes
// to fit the served context (Config.MaxPromptBytesPerToken) is refused
// before the tokenizer runs; checkPrompt checks the tokens.
func (s *Server) tokenize(text string) ([]int32, *apiError) {
	if e := s.checkPromptBytes(text, s.gen.Info().ContextLength, ""); e != nil {
		return nil, e.api
	}
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
	if ctx := requestContext(info, j.context); ctx < info.ContextLength && len(j.prompt) >= ctx {
		return classify(&infer.ContextError{PromptTokens: len(j.prompt), ContextLength: ctx}, d)
	}
	clampReply(j, info)
	if err := infer.Validate(infer.Request{Prompt: j.prompt, Sampling: j.sampling}, info); err != nil {
		return classify(err, d)
	}
	return nil
}

// clampReply fits j's reply into the room its prompt leaves in its context:
// max_tokens / num_predict beyond it (or unset, under a num_ctx smaller than
// the served context) become the room left, so generation ends with
// finish reason "length" rather than the request failing; repeat_last_n is
// clamped to the context. A prompt that leaves no room is refused by
// checkPrompt (against a num_ctx) or Validate.
func clampReply(j *job, info infer.ModelInfo) {
	ctx := requestContext(info, j.context)
	room := ctx - len(j.prompt)
	if room < 1 {
		return
	}
	s := &j.sampling
	if s.MaxTokens > room || (s.MaxTokens == 0 && ctx < info.ContextLength) {
		s.MaxTokens = room
	}
	if s.RepeatLastN > ctx || s.RepeatLastN == -1 {
		s.RepeatLastN = ctx
	}
}

// run serves j on the Generator, calling onText for every non-empty piece
// of text. It applies the request timeout and records TTFT and token
// counts.
func (s *Server) run(ctx context.Context, j *job, onText func(string) error) (*infer.Result, error) {
	return s.runPieces(ctx, j, func(p infer.Piece) error {
		if p.Text == "" {
			return nil
		}
		return onText(p.Text)
	})
}

// runPieces is run for callers that need every piece as the Generator
// emits it (with its logprobs), empty ones included. When it returns, the
// request's keep_alive (Ollama's; the default for OpenAI requests)
// restarts the model's expiry that /api/ps reports.
func (s *Server) runPieces(ctx context.Context, j *job, onPiece func(infer.Piece) error) (*infer.Result, error) {
	defer func() { s.keep.touch(s.now(), j.keepAlive) }()
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
		return onPiece(p)
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
