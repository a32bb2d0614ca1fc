package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/meshllm/meshllm/node/forward"
)

// ForwardHeader is the HTTP header with which a request narrows where it
// may be served (any, members or none); see withForward.
const ForwardHeader = "X-Meshllm-Forward"

// maxEchoedName bounds an unknown option name quoted back in an error.
const maxEchoedName = 64

// meshllmField is the body field every generating request takes besides
// its dialect's own: "meshllm": {"forward": "any" | "members" | "none"}.
// It is embedded in the chat, completion, responses, generate and Ollama
// chat request bodies.
type meshllmField struct {
	Meshllm *meshllmOptions `json:"meshllm"`
}

// meshllmOptions is the "meshllm" object: meshllm's own request options.
// Unknown keys are refused, not ignored: a misspelt "forward" would
// otherwise let a prompt go where the user said it must not.
type meshllmOptions struct {
	// Forward narrows the peer's forward policy for this request; Unset
	// when the object has no "forward".
	Forward forward.Policy
}

// UnmarshalJSON decodes the "meshllm" object, naming the field at fault
// (meshllm, meshllm.forward, meshllm.<unknown>) in its errors.
func (o *meshllmOptions) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return &fieldError{field: "meshllm", msg: `meshllm must be an object, like {"forward": "none"}`}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k != "forward" {
			if len(k) > maxEchoedName {
				k = k[:maxEchoedName] + "..."
			}
			return &fieldError{field: "meshllm." + k, msg: fmt.Sprintf("meshllm.%s is not a meshllm option: the only one is forward (any, members or none)", k)}
		}
	}
	raw, ok := m["forward"]
	if !ok || string(raw) == "null" {
		*o = meshllmOptions{}
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return &fieldError{field: "meshllm.forward", msg: "meshllm.forward must be a string: any, members or none"}
	}
	p, err := forward.Parse(s)
	if err != nil {
		return &fieldError{field: "meshllm.forward", msg: "meshllm.forward: " + err.Error()}
	}
	*o = meshllmOptions{Forward: p}
	return nil
}

// withForward returns r with the request's forward policy on its context
// (forward.WithPolicy), for the Generator (the router) to narrow the
// peer's own setting with: the X-Meshllm-Forward header's, the body
// field's (f), the narrowest of them when several are given. A request
// that says nothing returns r as it is. A header value that is not any,
// members or none (case and surrounding space aside) is a 400 naming the
// header; the body field's errors come from decoding.
func withForward(r *http.Request, f meshllmField) (*http.Request, *apiError) {
	p := forward.Unset
	for _, v := range r.Header.Values(ForwardHeader) {
		q, err := forward.Parse(v)
		if err != nil {
			return r, badRequest(ForwardHeader, "%s header: %v", ForwardHeader, err)
		}
		p = forward.Narrow(p, q)
	}
	if f.Meshllm != nil {
		p = forward.Narrow(p, f.Meshllm.Forward)
	}
	if p == forward.Unset {
		return r, nil
	}
	return r.WithContext(forward.WithPolicy(r.Context(), p)), nil
}
