package p2p

import (
	"fmt"
	"math"
	"time"
)

// Limits a decoder enforces on the fields of infer payloads; the client
// refuses to send a request beyond them.
const (
	MaxModelIDLen   = 256     // bytes of a model identity (cache.MaxModelLen)
	MaxPromptTokens = 1 << 20 // tokens of a prompt (the frame limit binds first by default)
	MaxStopStrings  = 16      // stop strings of a request
	MaxStopLen      = 256     // bytes of one stop string
	MaxMessageLen   = 4096    // bytes of an error message
	MaxReasonLen    = 64      // bytes of a finish reason
	maxCount        = 1 << 40 // counts of tokens in a final frame
	maxDuration     = 1 << 62 // nanoseconds of a duration field
	maxTokenID      = math.MaxInt32
)

// Sampling holds a request's sampling parameters; field for field the
// engine's (infer.Sampling), which they mean exactly: cmd/meshllm/wire
// converts one into the other field by field, and its round-trip test
// fails when a field of either is not carried.
type Sampling struct {
	Temperature   float32
	TopP          float32
	TopK          int
	MinP          float32
	RepeatPenalty float32
	RepeatLastN   int
	Seed          int64
	MaxTokens     int
	Stop          []string
	// The fields below travel only in a v2 payload (see wireVersionExt): a
	// request that sets any of them is refused by a peer that would
	// otherwise ignore them.
	PresencePenalty  float32
	FrequencyPenalty float32
	Constraint       *Constraint // nil: unconstrained
	Logprobs         bool
	TopLogprobs      int // 0..MaxTopLogprobs
}

// InferRequest is the request an origin peer forwards to a serving peer.
//
// Hops counts the forwards the request has taken on arrival: the wire always
// carries 1, because a request received over /meshllm/infer/1.0.0 has been
// forwarded once and must be served locally by the receiver (hop limit 1).
// The client refuses to send a request whose Hops is already 1 or more, and
// the server rejects Hops > 1 as a bad request.
type InferRequest struct {
	ModelID  string
	Prompt   []int32
	Sampling Sampling
	// Deadline is when the origin stops waiting; zero means none. It travels
	// as the time left when the frame is encoded, and the receiver rebuilds
	// it against its own clock, so clock offsets between peers do not matter
	// (the deadline only grows by the one-way latency).
	Deadline time.Time
	Hops     int
	// EstimatedCached is how many prompt tokens the origin expected the
	// server to hold: the serving peer echoes it into its metrics and the
	// origin compares it with InferFinal.CachedTokens (routing precision).
	EstimatedCached int
}

// InferPiece is a piece of generated text, streamed as it is produced.
type InferPiece struct {
	Text   string
	Tokens int // tokens this piece accounts for
	// Logprobs has an entry per token (at most Tokens, MaxPieceLogprobs)
	// when the request asked for logprobs; a piece with any travels as v2.
	Logprobs []TokenLogprob
}

// InferFinal closes a served request: usage, cache reuse and timings as the
// serving engine measured them.
type InferFinal struct {
	PromptTokens    int
	CachedTokens    int
	GeneratedTokens int
	QueueWait       time.Duration
	Prefill         time.Duration
	Decode          time.Duration
	TimeToFirst     time.Duration // from receipt of the request to the first token
	FinishReason    string
	// Elapsed is the serving peer's time from reading the request frame to
	// writing the final frame; the service sets it, not the handler. The
	// client's total time minus Elapsed is one round trip plus transfer
	// time: the RTT sample it reports.
	Elapsed time.Duration
}

// validate checks the limits a decoder enforces, so that a request that
// would be rejected remotely is rejected locally.
func (r *InferRequest) validate() error {
	switch {
	case len(r.ModelID) > MaxModelIDLen:
		return badRequest("model ID of %d bytes, limit %d", len(r.ModelID), MaxModelIDLen)
	case len(r.Prompt) > MaxPromptTokens:
		return badRequest("prompt of %d tokens, limit %d", len(r.Prompt), MaxPromptTokens)
	case len(r.Sampling.Stop) > MaxStopStrings:
		return badRequest("%d stop strings, limit %d", len(r.Sampling.Stop), MaxStopStrings)
	case r.Hops < 0 || r.EstimatedCached < 0:
		return badRequest("negative hops or estimate")
	}
	for _, s := range r.Sampling.Stop {
		if len(s) > MaxStopLen {
			return badRequest("stop string of %d bytes, limit %d", len(s), MaxStopLen)
		}
	}
	for _, t := range r.Prompt {
		if t < 0 {
			return badRequest("negative token %d", t)
		}
	}
	s := r.Sampling
	if err := s.validateExt(); err != nil {
		return err
	}
	for _, f := range []float32{s.Temperature, s.TopP, s.MinP, s.RepeatPenalty, s.PresencePenalty, s.FrequencyPenalty} {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return badRequest("non-finite sampling parameter")
		}
	}
	for _, v := range []int{s.TopK, s.RepeatLastN, s.MaxTokens} {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return badRequest("sampling parameter %d out of range", v)
		}
	}
	return nil
}

// AppendBinary appends r's encoding to b: v1 when its sampling uses none
// of the fields v2 added, else v2 (v1's fields, then those). now is the
// clock against which the deadline becomes the time left.
func (r *InferRequest) AppendBinary(b []byte, now time.Time) []byte {
	ext := r.Sampling.usesExt()
	if ext {
		b = append(b, wireVersionExt)
	} else {
		b = append(b, wireVersion)
	}
	b = appendString(b, r.ModelID)
	b = appendUvarint(b, uint64(len(r.Prompt)))
	for _, t := range r.Prompt {
		b = appendUvarint(b, uint64(uint32(t)))
	}
	s := &r.Sampling
	b = appendF32(b, s.Temperature)
	b = appendF32(b, s.TopP)
	b = appendVarint(b, int64(s.TopK))
	b = appendF32(b, s.MinP)
	b = appendF32(b, s.RepeatPenalty)
	b = appendVarint(b, int64(s.RepeatLastN))
	b = appendVarint(b, s.Seed)
	b = appendVarint(b, int64(s.MaxTokens))
	b = appendUvarint(b, uint64(len(s.Stop)))
	for _, st := range s.Stop {
		b = appendString(b, st)
	}
	var left uint64 // 0: no deadline; else 1 + nanoseconds left
	if !r.Deadline.IsZero() {
		left = 1
		if d := r.Deadline.Sub(now); d > 0 {
			left += uint64(d)
		}
	}
	b = appendUvarint(b, left)
	b = appendUvarint(b, uint64(r.Hops))
	b = appendUvarint(b, uint64(r.EstimatedCached))
	if ext {
		b = r.Sampling.appendExt(b)
	}
	return b
}

// DecodeInferRequest decodes a v1 or v2 request payload; now is the
// receiver's clock, against which the deadline is rebuilt. Errors wrap
// ErrFrameMalformed.
func DecodeInferRequest(p []byte, now time.Time) (*InferRequest, error) {
	return decodeInferRequest(p, now, MaxPromptTokens)
}

// decodeInferRequest is DecodeInferRequest with a prompt of at most
// maxPrompt tokens (<= MaxPromptTokens); a longer one fails before its
// tokens are allocated.
func decodeInferRequest(p []byte, now time.Time, maxPrompt int) (*InferRequest, error) {
	d := decoder{b: p}
	ext := d.versionUpTo("infer request", wireVersionExt) == wireVersionExt
	r := &InferRequest{}
	r.ModelID = d.str(MaxModelIDLen)
	if n := d.count(MaxPromptTokens, 1); n > maxPrompt {
		d.fail("prompt of %d tokens, this peer decodes at most %d", n, maxPrompt)
	} else if n > 0 {
		r.Prompt = make([]int32, n)
		for i := range r.Prompt {
			r.Prompt[i] = int32(d.uvarint(maxTokenID))
		}
	}
	s := &r.Sampling
	s.Temperature = d.f32()
	s.TopP = d.f32()
	s.TopK = d.int32()
	s.MinP = d.f32()
	s.RepeatPenalty = d.f32()
	s.RepeatLastN = d.int32()
	s.Seed = d.varint()
	s.MaxTokens = d.int32()
	if n := d.count(MaxStopStrings, 1); n > 0 {
		s.Stop = make([]string, n)
		for i := range s.Stop {
			s.Stop[i] = d.str(MaxStopLen)
		}
	}
	if left := d.uvarint(maxDuration); left > 0 {
		r.Deadline = now.Add(time.Duration(left - 1))
	}
	r.Hops = int(d.uvarint(math.MaxInt32))
	r.EstimatedCached = int(d.uvarint(math.MaxInt32))
	if ext {
		s.decodeExt(&d)
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// AppendBinary appends p's encoding to b: v1 without logprobs, v2 (v1's
// fields, then the logprobs) with. Logprobs beyond what a decoder accepts
// (more than Tokens or MaxPieceLogprobs entries, longer token texts, more
// alternatives, values above 0 or not finite) are cut or clamped; the
// service splits a long piece first (InferPiece.split), so nothing is cut
// in practice.
func (p *InferPiece) AppendBinary(b []byte) []byte {
	n := min(len(p.Logprobs), max(p.Tokens, 0), MaxPieceLogprobs)
	if n == 0 {
		b = append(b, wireVersion)
	} else {
		b = append(b, wireVersionExt)
	}
	b = appendString(b, p.Text)
	b = appendUvarint(b, uint64(max(p.Tokens, 0)))
	if n > 0 {
		b = appendLogprobs(b, p.Logprobs[:n])
	}
	return b
}

// DecodeInferPiece decodes a v1 or v2 piece payload.
func DecodeInferPiece(p []byte) (InferPiece, error) {
	d := decoder{b: p}
	ext := d.versionUpTo("infer piece", wireVersionExt) == wireVersionExt
	var pc InferPiece
	pc.Text = d.str(len(p))
	pc.Tokens = int(d.uvarint(math.MaxInt32))
	if ext {
		pc.Logprobs = decodeLogprobs(&d, pc.Tokens)
	}
	if d.err != nil {
		return InferPiece{}, d.err
	}
	return pc, nil
}

// AppendBinary appends f's v1 encoding to b.
func (f *InferFinal) AppendBinary(b []byte) []byte {
	b = append(b, wireVersion)
	b = appendUvarint(b, uint64(max(f.PromptTokens, 0)))
	b = appendUvarint(b, uint64(max(f.CachedTokens, 0)))
	b = appendUvarint(b, uint64(max(f.GeneratedTokens, 0)))
	for _, t := range []time.Duration{f.QueueWait, f.Prefill, f.Decode, f.TimeToFirst} {
		b = appendUvarint(b, uint64(max(t, 0)))
	}
	b = appendString(b, f.FinishReason)
	return appendUvarint(b, uint64(max(f.Elapsed, 0)))
}

// DecodeInferFinal decodes a v1 final payload.
func DecodeInferFinal(p []byte) (*InferFinal, error) {
	d := decoder{b: p}
	d.version("infer final")
	f := &InferFinal{}
	f.PromptTokens = int(d.uvarint(maxCount))
	f.CachedTokens = int(d.uvarint(maxCount))
	f.GeneratedTokens = int(d.uvarint(maxCount))
	f.QueueWait = time.Duration(d.uvarint(maxDuration))
	f.Prefill = time.Duration(d.uvarint(maxDuration))
	f.Decode = time.Duration(d.uvarint(maxDuration))
	f.TimeToFirst = time.Duration(d.uvarint(maxDuration))
	f.FinishReason = d.str(MaxReasonLen)
	f.Elapsed = time.Duration(d.uvarint(maxDuration))
	if d.err != nil {
		return nil, d.err
	}
	return f, nil
}

func badRequest(format string, args ...any) *InferError {
	return &InferError{Code: ErrBadRequest, Message: fmt.Sprintf(format, args...)}
}
