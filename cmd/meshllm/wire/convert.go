package wire

import (
	"github.com/meshllm/meshllm/infer"
	"github.com/meshllm/meshllm/p2p"
)

// SamplingToWire converts an engine request's sampling parameters to the
// wire's, field by field (TestSamplingRoundTrip fails when a field of
// either type is not carried). Slices are shared, not copied.
func SamplingToWire(s infer.Sampling) p2p.Sampling {
	w := p2p.Sampling{
		Temperature:      s.Temperature,
		TopP:             s.TopP,
		TopK:             s.TopK,
		MinP:             s.MinP,
		RepeatPenalty:    s.RepeatPenalty,
		RepeatLastN:      s.RepeatLastN,
		Seed:             s.Seed,
		MaxTokens:        s.MaxTokens,
		Stop:             s.Stop,
		PresencePenalty:  s.PresencePenalty,
		FrequencyPenalty: s.FrequencyPenalty,
		Logprobs:         s.Logprobs,
		TopLogprobs:      s.TopLogprobs,
	}
	if c := s.Constraint; c != nil {
		w.Constraint = &p2p.Constraint{JSONSchema: c.JSONSchema, Prefix: c.Prefix, Suffix: c.Suffix}
	}
	return w
}

// SamplingFromWire is SamplingToWire's inverse.
func SamplingFromWire(w p2p.Sampling) infer.Sampling {
	s := infer.Sampling{
		Temperature:      w.Temperature,
		TopP:             w.TopP,
		TopK:             w.TopK,
		MinP:             w.MinP,
		RepeatPenalty:    w.RepeatPenalty,
		RepeatLastN:      w.RepeatLastN,
		Seed:             w.Seed,
		MaxTokens:        w.MaxTokens,
		Stop:             w.Stop,
		PresencePenalty:  w.PresencePenalty,
		FrequencyPenalty: w.FrequencyPenalty,
		Logprobs:         w.Logprobs,
		TopLogprobs:      w.TopLogprobs,
	}
	if c := w.Constraint; c != nil {
		s.Constraint = &infer.Constraint{JSONSchema: c.JSONSchema, Prefix: c.Prefix, Suffix: c.Suffix}
	}
	return s
}

// PieceToWire converts a generated piece, logprobs included, to the wire's.
func PieceToWire(p infer.Piece) p2p.InferPiece {
	w := p2p.InferPiece{Text: p.Text, Tokens: p.Tokens}
	if len(p.Logprobs) > 0 {
		w.Logprobs = make([]p2p.TokenLogprob, len(p.Logprobs))
		for i, lp := range p.Logprobs {
			w.Logprobs[i] = p2p.TokenLogprob{Token: lp.Token, Logprob: lp.Logprob}
			if len(lp.Top) > 0 {
				w.Logprobs[i].Top = make([]p2p.TopLogprob, len(lp.Top))
				for j, t := range lp.Top {
					w.Logprobs[i].Top[j] = p2p.TopLogprob{Token: t.Token, Logprob: t.Logprob}
				}
			}
		}
	}
	return w
}

// PieceFromWire is PieceToWire's inverse.
func PieceFromWire(w p2p.InferPiece) infer.Piece {
	p := infer.Piece{Text: w.Text, Tokens: w.Tokens}
	if len(w.Logprobs) > 0 {
		p.Logprobs = make([]infer.TokenLogprob, len(w.Logprobs))
		for i, lp := range w.Logprobs {
			p.Logprobs[i] = infer.TokenLogprob{Token: lp.Token, Logprob: lp.Logprob}
			if len(lp.Top) > 0 {
				p.Logprobs[i].Top = make([]infer.TopLogprob, len(lp.Top))
				for j, t := range lp.Top {
					p.Logprobs[i].Top[j] = infer.TopLogprob{Token: t.Token, Logprob: t.Logprob}
				}
			}
		}
	}
	return p
}
