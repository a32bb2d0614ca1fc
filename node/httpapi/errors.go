package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/meshllm/meshllm/infer"
)

// apiError is an error on its way to a client: an HTTP status, a message,
// and the OpenAI type/param/code that go with it. Both APIs render it in
// their own shape (see writeOpenAIError and writeOllamaError).
type apiError struct {
	status  int
	message string
	typ     string // OpenAI error type: invalid_request_error, ...
	param   string // OpenAI param the error is about, if any
	code    string // OpenAI machine-readable code, if any
	retry   bool   // set Retry-After
}

func (e *apiError) Error() string { return e.message }

// OpenAI error types.
const (
	typeInvalidRequest = "invalid_request_error"
	typeNotFound       = "not_found_error"
	typeAuth           = "authentication_error"
	typeServer         = "server_error"
	typeRateLimit      = "rate_limit_error"
	typeTimeout        = "timeout_error"
)

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), typ: typeInvalidRequest, param: param}
}

func modelNotFound(name string) *apiError {
	msg := fmt.Sprintf("model %q not found", name)
	return &apiError{status: http.StatusNotFound, message: msg, typ: typeInvalidRequest, param: "model", code: "model_not_found"}
}

func missingField(name string) *apiError {
	e := badRequest(name, "%s is required", name)
	e.code = "missing_required_parameter"
	return e
}

// busyStatus is the status a busy engine answers with in each API: OpenAI
// documents 429 for "the engine is currently overloaded" (and its SDKs retry
// it); Ollama answers 503 when its request queue is full.
type dialect int

const (
	dialectOpenAI dialect = iota
	dialectOllama
)

// classify turns an error from tokenizing, validating or generating into an
// apiError for the given API.
func classify(err error, d dialect) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ce *infer.ContextError
	switch {
	case errors.As(err, &ce):
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "messages", code: "context_length_exceeded",
			message: fmt.Sprintf("prompt is %d tokens, but the model's context holds %d: shorten the prompt", ce.PromptTokens, ce.ContextLength)}
	case errors.Is(err, infer.ErrContextOverflow):
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, param: "messages", code: "context_length_exceeded", message: err.Error()}
	case errors.Is(err, infer.ErrBadRequest):
		return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, message: err.Error()}
	case errors.Is(err, infer.ErrUnknownModel):
		return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, param: "model", code: "model_not_found", message: err.Error()}
	case errors.Is(err, infer.ErrBusy):
		status := http.StatusTooManyRequests
		if d == dialectOllama {
			status = http.StatusServiceUnavailable
		}
		return &apiError{status: status, typ: typeRateLimit, code: "engine_busy", retry: true,
			message: "server busy: the engine's request queue is full, retry later"}
	case errors.Is(err, infer.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: typeServer, code: "shutting_down", retry: true,
			message: "server is shutting down"}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, typ: typeTimeout, code: "timeout",
			message: "request timed out before the reply was complete"}
	case errors.Is(err, context.Canceled), errors.Is(err, errClientGone):
		// The client went away; nobody reads this. 499 is nginx's
		// "client closed request", used for the metrics only.
		return &apiError{status: statusClientClosed, typ: typeServer, code: "canceled", message: "request canceled"}
	default:
		return &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "engine_failure",
			message: "the engine failed to serve the request: " + err.Error()}
	}
}

// statusClientClosed is recorded when the client disconnected first.
const statusClientClosed = 499
