package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// readBody reads a request body of at most limit bytes that must be valid
// UTF-8. (encoding/json would silently turn invalid bytes into U+FFFD and
// the model would see a prompt the client never sent.) A body that does
// not arrive within Config.BodyTimeout (see withDeadlines) is a 408.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
				message: fmt.Sprintf("request body exceeds %d bytes", limit)}
		}
		if bodyTimedOut(err) {
			return nil, errBodyTimeout(w)
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, checkBody(body)
}

// checkBody rejects an empty or non-UTF-8 body.
func checkBody(body []byte) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "request body is empty: a JSON object is required")
	}
	if !utf8.Valid(body) {
		e := badRequest("", "request body is not valid UTF-8")
		e.code = "invalid_utf8"
		return e
	}
	return nil
}

// decodeJSON decodes exactly one JSON object into v.
func decodeJSON(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "invalid JSON: unexpected data after the top-level value")
	}
	return nil
}

// jsonError describes a decoding error for a client.
func jsonError(err error) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return badRequest("", "invalid JSON: the request must be a JSON object, got %s", te.Value)
		}
		return badRequest(field, "invalid JSON: field %q must not be %s", field, te.Value)
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return badRequest(fe.field, "%s", fe.msg)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("", "invalid JSON: unexpected end of input")
	}
	return badRequest("", "invalid JSON: %v", err)
}

// fieldError is a custom unmarshaler's complaint about one field.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.msg }

// stopList is a stop parameter: a string or an array of strings.
type stopList []string

// UnmarshalJSON accepts null, "s" or ["a", "b"].
func (s *stopList) UnmarshalJSON(b []byte) error {
	l, err := stringOrList(b, "stop", "stop must be a string or an array of strings")
	*s = l
	return err
}

// stringOrList decodes null (nil), "s" ({s}) or ["a", "b"]; anything else
// is a fieldError on field with msg.
func stringOrList(b []byte, field, msg string) ([]string, error) {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil, nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return nil, &fieldError{field: field, msg: msg}
	}
	return many, nil
}
