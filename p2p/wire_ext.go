package p2p

import "math"

// Limits of the v2 fields (structured outputs, penalties, logprobs). The
// schema and affix limits equal infer.MaxSchemaBytes and
// infer.MaxAffixBytes, and MaxTopLogprobs infer.MaxTopLogprobs
// (cmd/meshllm/wire's tests check it; p2p does not import infer).
const (
	MaxSchemaLen       = 64 << 10 // bytes of Constraint.JSONSchema
	MaxAffixLen        = 256      // bytes of Constraint.Prefix and Suffix
	MaxTopLogprobs     = 20       // alternatives of one token's logprobs
	MaxPieceLogprobs   = 1024     // logprob entries of one piece
	MaxLogprobTokenLen = 128      // bytes of one token's text in logprobs
	// minLogprob is the floor an encoder clamps a log probability to.
	minLogprob = -9999
)

// Constraint restricts generation (infer.Constraint): the output is
// Prefix, one JSON value satisfying JSONSchema, then Suffix.
type Constraint struct {
	JSONSchema string
	Prefix     string
	Suffix     string
}

// TokenLogprob is one generated token's log probability and its most
// likely alternatives (infer.TokenLogprob).
type TokenLogprob struct {
	Token   string
	Logprob float32
	Top     []TopLogprob
}

// TopLogprob is one alternative token at a position (infer.TopLogprob).
type TopLogprob struct {
	Token   string
	Logprob float32
}

// Flags of a v2 request's sampling extension; other bits are malformed.
const (
	extLogprobs   = 1 << 0
	extConstraint = 1 << 1
	extKnownFlags = extLogprobs | extConstraint
)

// usesExt reports whether s sets a field only v2 carries.
func (s *Sampling) usesExt() bool {
	return s.PresencePenalty != 0 || s.FrequencyPenalty != 0 || s.Constraint != nil || s.Logprobs || s.TopLogprobs != 0
}

// validateExt checks the v2 fields against the limits a decoder enforces.
func (s *Sampling) validateExt() error {
	if s.TopLogprobs < 0 || s.TopLogprobs > MaxTopLogprobs {
		return badRequest("top_logprobs %d, limit %d", s.TopLogprobs, MaxTopLogprobs)
	}
	if c := s.Constraint; c != nil {
		switch {
		case len(c.JSONSchema) > MaxSchemaLen:
			return badRequest("json schema of %d bytes, limit %d", len(c.JSONSchema), MaxSchemaLen)
		case len(c.Prefix) > MaxAffixLen || len(c.Suffix) > MaxAffixLen:
			return badRequest("constraint prefix or suffix over %d bytes", MaxAffixLen)
		}
	}
	return nil
}

// appendExt appends the v2 sampling fields:
//
//	f32 presence_penalty, f32 frequency_penalty, uvarint flags,
//	uvarint top_logprobs, and with flag extConstraint:
//	str json_schema, str prefix, str suffix
func (s *Sampling) appendExt(b []byte) []byte {
	b = appendF32(b, s.PresencePenalty)
	b = appendF32(b, s.FrequencyPenalty)
	var flags uint64
	if s.Logprobs {
		flags |= extLogprobs
	}
	if s.Constraint != nil {
		flags |= extConstraint
	}
	b = appendUvarint(b, flags)
	b = appendUvarint(b, uint64(max(s.TopLogprobs, 0)))
	if c := s.Constraint; c != nil {
		b = appendString(b, c.JSONSchema)
		b = appendString(b, c.Prefix)
		b = appendString(b, c.Suffix)
	}
	return b
}

// decodeExt reads what appendExt wrote.
func (s *Sampling) decodeExt(d *decoder) {
	s.PresencePenalty = d.f32()
	s.FrequencyPenalty = d.f32()
	flags := d.uvarint(math.MaxUint32)
	if d.err == nil && flags&^extKnownFlags != 0 {
		d.fail("unknown sampling flags %#x", flags)
	}
	s.Logprobs = flags&extLogprobs != 0
	s.TopLogprobs = int(d.uvarint(MaxTopLogprobs))
	if flags&extConstraint != 0 {
		c := &Constraint{}
		c.JSONSchema = d.str(MaxSchemaLen)
		c.Prefix = d.str(MaxAffixLen)
		c.Suffix = d.str(MaxAffixLen)
		if d.err == nil {
			s.Constraint = c
		}
	}
}

// appendLogprobs appends a piece's logprobs:
//
//	uvarint n, then n x (str token, f32 logprob, uvarint m,
//	m x (str token, f32 logprob))
//
// cutting token texts, alternatives and values to what a decoder accepts.
func appendLogprobs(b []byte, lps []TokenLogprob) []byte {
	b = appendUvarint(b, uint64(len(lps)))
	for i := range lps {
		lp := &lps[i]
		b = appendString(b, cutText(lp.Token))
		b = appendF32(b, clampLogprob(lp.Logprob))
		top := lp.Top[:min(len(lp.Top), MaxTopLogprobs)]
		b = appendUvarint(b, uint64(len(top)))
		for _, t := range top {
			b = appendString(b, cutText(t.Token))
			b = appendF32(b, clampLogprob(t.Logprob))
		}
	}
	return b
}

// decodeLogprobs reads what appendLogprobs wrote, for a piece of tokens
// tokens: at most that many entries (and MaxPieceLogprobs), at least one.
func decodeLogprobs(d *decoder, tokens int) []TokenLogprob {
	n := d.count(min(tokens, MaxPieceLogprobs), 6) // str(""), f32, uvarint(0)
	if d.err == nil && n == 0 {
		d.fail("v2 piece without logprobs")
	}
	if d.err != nil {
		return nil
	}
	lps := make([]TokenLogprob, n)
	for i := range lps {
		lp := &lps[i]
		lp.Token = d.str(MaxLogprobTokenLen)
		lp.Logprob = d.logprob()
		if m := d.count(MaxTopLogprobs, 5); m > 0 {
			lp.Top = make([]TopLogprob, m)
			for j := range lp.Top {
				lp.Top[j].Token = d.str(MaxLogprobTokenLen)
				lp.Top[j].Logprob = d.logprob()
			}
		}
		if d.err != nil {
			return nil
		}
	}
	return lps
}

// logprob reads a log probability: finite, at least minLogprob, at most 0.
func (d *decoder) logprob() float32 {
	v := d.f32()
	if d.err == nil && (v > 0 || v < minLogprob) {
		d.fail("log probability %g outside [%d, 0]", v, minLogprob)
		return 0
	}
	return v
}

func clampLogprob(v float32) float32 {
	switch {
	case v > 0:
		return 0
	case !(v >= minLogprob): // NaN too
		return minLogprob
	}
	return v
}

func cutText(s string) string { return s[:min(len(s), MaxLogprobTokenLen)] }

// logprobLen is the encoded size of lp (before any cut).
func logprobLen(lp *TokenLogprob) int {
	n := uvarintLen(uint64(len(lp.Token))) + min(len(lp.Token), MaxLogprobTokenLen) + 4 + uvarintLen(uint64(len(lp.Top)))
	for _, t := range lp.Top[:min(len(lp.Top), MaxTopLogprobs)] {
		n += uvarintLen(uint64(len(t.Token))) + min(len(t.Token), MaxLogprobTokenLen) + 4
	}
	return n
}

// split cuts p into pieces whose logprobs a decoder accepts (at most
// MaxPieceLogprobs entries, one per token) and whose payloads stay near
// maxPayload bytes (a piece holds at least one entry, so one entry larger
// than that is not cut). The text goes with the first part; a later part
// carries no text. Their Tokens add up to p.Tokens, and their Logprobs to
// p.Logprobs. A piece that fits is returned as is.
func (p InferPiece) split(maxPayload int) []InferPiece {
	if len(p.Logprobs) == 0 {
		return []InferPiece{p}
	}
	head := 1 + uvarintLen(uint64(len(p.Text))) + len(p.Text) + 2*maxLenBytes // version, text, tokens, count
	var parts []InferPiece
	start, size := 0, head
	for i := range p.Logprobs {
		n := logprobLen(&p.Logprobs[i])
		if i > start && (i-start == MaxPieceLogprobs || size+n > maxPayload) {
			parts = append(parts, InferPiece{Tokens: i - start, Logprobs: p.Logprobs[start:i]})
			start, size = i, 1+1+2*maxLenBytes
		}
		size += n
	}
	parts = append(parts, InferPiece{Logprobs: p.Logprobs[start:]})
	if len(parts) == 1 {
		return []InferPiece{p}
	}
	parts[0].Text = p.Text
	used := 0
	for _, pt := range parts[:len(parts)-1] {
		used += pt.Tokens
	}
	parts[len(parts)-1].Tokens = max(p.Tokens-used, len(parts[len(parts)-1].Logprobs))
	return parts
}
