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
// engine's (infer.Sampling): cmd/meshllm/wire converts one into the other
// directly, so a field added to one must be added to both (the build
// fails until it is).
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
	for _, f := range []float32{s.Temperature, s.TopP, s.MinP, s.RepeatPenalty} {
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

// AppendBinary appends r's v1 encoding to b; now is the clock against which
// the deadline becomes the time left.
func (r *InferRequest) AppendBinary(b []byte, now time.Time) []byte {
	b = append(b, wireVersion)
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
	return appendUvarint(b, uint64(r.EstimatedCached))
}

// DecodeInferRequest decodes a v1 request payload; now is the receiver's
// clock, against which the deadline is rebuilt. Errors wrap
// ErrFrameMalformed.
func DecodeInferRequest(p []byte, now time.Time) (*InferRequest, error) {
	d := decoder{b: p}
	d.version("infer request")
	r := &InferRequest{}
	r.ModelID = d.str(MaxModelIDLen)
	if n := d.count(MaxPromptTokens, 1); n > 0 {
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
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// AppendBinary appends p's v1 encoding to b.
func (p *InferPiece) AppendBinary(b []byte) []byte {
	b = append(b, wireVersion)
	b = appendString(b, p.Text)
	return appendUvarint(b, uint64(p.Tokens))
}

// DecodeInferPiece decodes a v1 piece payload.
func DecodeInferPiece(p []byte) (InferPiece, error) {
	d := decoder{b: p}
	d.version("infer piece")
	var pc InferPiece
	pc.Text = d.str(len(p))
	pc.Tokens = int(d.uvarint(math.MaxInt32))
	return pc, d.err
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
