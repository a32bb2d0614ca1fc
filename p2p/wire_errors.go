package p2p

import (
	"fmt"
	"math"
	"time"
)

// ErrorCode classifies a failed request. Each code is itself an error value,
// so callers match a remote failure with errors.Is(err, p2p.ErrBusy) and
// read its message and retry hint with errors.As(err, &*InferError).
type ErrorCode uint8

// Error codes of the infer protocol; the numbers are on the wire.
const (
	// ErrBusy: the serving peer is above its queue or stream limit; try
	// another peer or serve locally, and avoid this one for RetryAfter.
	ErrBusy ErrorCode = 1
	// ErrUnknownModel: the serving peer does not serve that model.
	ErrUnknownModel ErrorCode = 2
	// ErrBadRequest: the request is invalid (limits, hop limit, parameters).
	ErrBadRequest ErrorCode = 3
	// ErrContextOverflow: the prompt does not fit the serving model's context.
	ErrContextOverflow ErrorCode = 4
	// ErrInternal: the serving peer failed; the request was not served.
	ErrInternal ErrorCode = 5
	// ErrDeadline: the request's deadline passed on the serving peer.
	ErrDeadline ErrorCode = 6
)

func (c ErrorCode) Error() string {
	switch c {
	case ErrBusy:
		return "busy"
	case ErrUnknownModel:
		return "unknown model"
	case ErrBadRequest:
		return "bad request"
	case ErrContextOverflow:
		return "context overflow"
	case ErrInternal:
		return "internal error"
	case ErrDeadline:
		return "deadline exceeded"
	}
	return fmt.Sprintf("error code %d", uint8(c))
}

// InferError is a typed failure of a request, sent by the serving peer in
// an error frame, or returned by a handler to choose the code sent. It
// unwraps to its Code.
type InferError struct {
	Code       ErrorCode
	Message    string
	RetryAfter time.Duration // hint for ErrBusy; 0 = none
}

func (e *InferError) Error() string {
	if e.Message == "" {
		return "p2p: " + e.Code.Error()
	}
	return "p2p: " + e.Code.Error() + ": " + e.Message
}

// Unwrap returns the code, so errors.Is(err, ErrBusy) matches.
func (e *InferError) Unwrap() error { return e.Code }

// AppendBinary appends e's v1 encoding to b; a message beyond MaxMessageLen
// is cut.
func (e *InferError) AppendBinary(b []byte) []byte {
	b = append(b, wireVersion)
	b = appendUvarint(b, uint64(e.Code))
	msg := e.Message
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	b = appendString(b, msg)
	return appendUvarint(b, uint64(max(e.RetryAfter, 0)))
}

// DecodeInferError decodes a v1 error payload. Codes this version does not
// know are kept (callers treat them like ErrInternal); code 0 is malformed.
func DecodeInferError(p []byte) (*InferError, error) {
	d := decoder{b: p}
	d.version("infer error")
	e := &InferError{}
	c := d.uvarint(math.MaxUint8)
	if d.err == nil && c == 0 {
		d.fail("error code 0")
	}
	e.Code = ErrorCode(c)
	e.Message = d.str(MaxMessageLen)
	e.RetryAfter = time.Duration(d.uvarint(maxDuration))
	if d.err != nil {
		return nil, d.err
	}
	return e, nil
}
