package httpapi

import (
	"math"

	"github.com/meshllm/meshllm/infer"
)

// samplingParams are the sampling fields both APIs share, nil where the
// client did not set them.
type samplingParams struct {
	Temperature   *float64
	TopP          *float64
	TopK          *int
	MinP          *float64
	RepeatPenalty *float64
	RepeatLastN   *int
	Seed          *int64
	MaxTokens     *int
	maxTokensName string // "max_tokens", "max_completion_tokens" or "num_predict"
	Stop          []string
	// PresencePenalty and FrequencyPenalty are OpenAI's (and Ollama's
	// options of the same names), -2..2.
	PresencePenalty  *float64
	FrequencyPenalty *float64
}

// maxStops is the most stop strings a request may carry (infer.Validate's
// limit).
const maxStops = 16

// sampling validates p and turns it into the engine's parameters. maxTemp is
// the API's temperature ceiling (2 for OpenAI, as OpenAI documents).
func (s *Server) sampling(p samplingParams, info infer.ModelInfo, maxTemp float64) (infer.Sampling, *apiError) {
	out := infer.Sampling{Temperature: -1, Seed: -1, MaxTokens: s.cfg.DefaultMaxTokens}
	if v := p.Temperature; v != nil {
		if !finite(*v) || *v < 0 || *v > maxTemp {
			return out, badRequest("temperature", "temperature must be between 0 and %g, got %g", maxTemp, *v)
		}
		out.Temperature = float32(*v)
	}
	if v := p.TopP; v != nil {
		if !finite(*v) || *v < 0 || *v > 1 {
			return out, badRequest("top_p", "top_p must be between 0 and 1, got %g", *v)
		}
		out.TopP = float32(*v)
	}
	if v := p.TopK; v != nil {
		if *v < 0 {
			return out, badRequest("top_k", "top_k must be >= 0, got %d", *v)
		}
		out.TopK = *v
	}
	if v := p.MinP; v != nil {
		if !finite(*v) || *v < 0 || *v > 1 {
			return out, badRequest("min_p", "min_p must be between 0 and 1, got %g", *v)
		}
		out.MinP = float32(*v)
	}
	if v := p.RepeatPenalty; v != nil {
		if !finite(*v) || *v < 0 || *v > 10 {
			return out, badRequest("repeat_penalty", "repeat_penalty must be between 0 and 10, got %g", *v)
		}
		out.RepeatPenalty = float32(*v)
	}
	if v := p.RepeatLastN; v != nil {
		switch {
		case *v == -1: // Ollama: the whole context
			out.RepeatLastN = info.ContextLength
		case *v < 0:
			return out, badRequest("repeat_last_n", "repeat_last_n must be >= -1, got %d", *v)
		default:
			out.RepeatLastN = *v
		}
	}
	if v := p.Seed; v != nil {
		out.Seed = *v
	}
	if v := p.MaxTokens; v != nil {
		name := p.maxTokensName
		switch {
		case *v < 1:
			return out, badRequest(name, "%s must be at least 1, got %d", name, *v)
		case s.cfg.MaxTokensLimit > 0 && *v > s.cfg.MaxTokensLimit:
			return out, badRequest(name, "%s %d is more than this server allows (%d, the configured limit)", name, *v, s.cfg.MaxTokensLimit)
		}
		// Beyond the context, a reply is clamped (finish_reason "length"),
		// as Ollama and OpenAI clients expect; checkPrompt clamps it again
		// to the room the prompt leaves.
		out.MaxTokens = min(*v, s.maxTokensLimit(info))
	}
	for _, pen := range []struct {
		name string
		v    *float64
		out  *float32
	}{{"presence_penalty", p.PresencePenalty, &out.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty, &out.FrequencyPenalty}} {
		if pen.v == nil {
			continue
		}
		if !finite(*pen.v) || *pen.v < -infer.MaxPenalty || *pen.v > infer.MaxPenalty {
			return out, badRequest(pen.name, "%s must be between %d and %d, got %g", pen.name, -infer.MaxPenalty, infer.MaxPenalty, *pen.v)
		}
		*pen.out = float32(*pen.v)
	}
	for _, stop := range p.Stop {
		if stop != "" {
			out.Stop = append(out.Stop, stop)
		}
	}
	if len(out.Stop) > maxStops {
		return out, badRequest("stop", "at most %d stop strings, got %d", maxStops, len(out.Stop))
	}
	return out, nil
}

// maxTokensLimit is the largest reply a request may ask for.
func (s *Server) maxTokensLimit(info infer.ModelInfo) int {
	limit := info.ContextLength
	if s.cfg.MaxTokensLimit > 0 && (limit <= 0 || s.cfg.MaxTokensLimit < limit) {
		limit = s.cfg.MaxTokensLimit
	}
	if limit <= 0 {
		limit = math.MaxInt32
	}
	return limit
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
