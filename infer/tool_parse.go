package infer

import (
	"encoding/json"
	"strings"
)

// parseRegion parses the held tool-call part of a reply (it starts with
// the format's marker, or is the whole reply for formats without one). It
// returns the content in it, the calls, and whether the region begins with
// content (so the white space before it is content too). Calls have no IDs
// yet.
func parseRegion(f ToolFormat, r string, tools []Tool) (content string, calls []ToolCall, lead bool) {
	switch f {
	case ToolFormatHermes, ToolFormatQwenXML, ToolFormatGLM:
		return parseTagged(r, tools)
	}
	var ok bool
	switch f {
	case ToolFormatLlama3:
		calls, ok = parseLlama3(r, tools)
	case ToolFormatMistral:
		calls, ok = parseMistral(r)
	case ToolFormatMistralArgs:
		calls, ok = parseMistralArgs(r)
	case ToolFormatGeneric:
		content, calls, ok = parseGeneric(r)
	}
	if !ok || len(calls) > maxToolCalls {
		return r, nil, true
	}
	return content, calls, false
}

// nextJSON decodes the JSON value at the start of s (after white space):
// the value and the rest of s.
func nextJSON(s string) (*jsonNode, string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, "", false
	}
	n, err := parseJSON(raw)
	if err != nil {
		return nil, "", false
	}
	return n, s[dec.InputOffset():], true
}

// parseLlama3 parses a reply that is one or more {"name": ...,
// "parameters": {...}} objects (after an optional <|python_tag|>),
// separated by white space or semicolons. When tools were offered, each
// name must be one of them: a JSON answer is not a call.
func parseLlama3(r string, tools []Tool) ([]ToolCall, bool) {
	r = strings.TrimPrefix(r, pythonTag)
	var calls []ToolCall
	for {
		r = strings.TrimLeft(r, spaces+";")
		if r == "" {
			break
		}
		n, rest, ok := nextJSON(r)
		if !ok {
			return nil, false
		}
		call, ok := callFromObject(n, true)
		if !ok || len(tools) > 0 && !offered(tools, call.Name) {
			return nil, false
		}
		calls = append(calls, call)
		r = rest
	}
	return calls, len(calls) > 0
}

func offered(tools []Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// parseMistral parses [TOOL_CALLS] followed by a JSON array of calls (or
// one call), possibly repeated.
func parseMistral(r string) ([]ToolCall, bool) {
	var calls []ToolCall
	for {
		r = strings.TrimLeft(r, spaces)
		if r == "" {
			break
		}
		if !strings.HasPrefix(r, markerMistral) {
			return nil, false
		}
		n, rest, ok := nextJSON(r[len(markerMistral):])
		if !ok {
			return nil, false
		}
		items := []*jsonNode{n}
		if n.kind == 'a' {
			items = n.vals
		}
		for _, it := range items {
			call, ok := callFromObject(it, false)
			if !ok {
				return nil, false
			}
			calls = append(calls, call)
		}
		r = rest
	}
	return calls, len(calls) > 0
}

// parseMistralArgs parses [TOOL_CALLS]NAME[ARGS]{...} (a [CALL_ID]ID may
// follow the name), possibly repeated.
func parseMistralArgs(r string) ([]ToolCall, bool) {
	var calls []ToolCall
	for {
		r = strings.TrimLeft(r, spaces)
		if r == "" {
			break
		}
		if !strings.HasPrefix(r, markerMistral) {
			return nil, false
		}
		r = r[len(markerMistral):]
		i := strings.Index(r, "[ARGS]")
		if i < 0 {
			return nil, false
		}
		name, _, _ := strings.Cut(r[:i], "[CALL_ID]")
		name = strings.TrimSpace(name)
		if !validCallName(name) {
			return nil, false
		}
		n, rest, ok := nextJSON(r[i+len("[ARGS]"):])
		if !ok {
			return nil, false
		}
		obj, err := argumentsObject(n.bytes())
		if err != nil {
			return nil, false
		}
		calls = append(calls, ToolCall{Name: name, Arguments: obj.bytes()})
		r = rest
	}
	return calls, len(calls) > 0
}

// parseGeneric parses a generic reply: one JSON object with "tool_calls"
// (an array of calls; "tool_call", one call, is accepted too) and/or
// "response" (the content).
func parseGeneric(r string) (string, []ToolCall, bool) {
	n, rest, ok := nextJSON(r)
	if !ok || n.kind != 'o' || strings.TrimLeft(rest, spaces) != "" {
		return "", nil, false
	}
	var calls []ToolCall
	if tc := n.get("tool_calls"); tc != nil {
		if tc.kind != 'a' {
			return "", nil, false
		}
		for _, it := range tc.vals {
			call, ok := callFromObject(it, false)
			if !ok {
				return "", nil, false
			}
			calls = append(calls, call)
		}
	} else if tc := n.get("tool_call"); tc != nil {
		call, ok := callFromObject(tc, false)
		if !ok {
			return "", nil, false
		}
		calls = append(calls, call)
	}
	content := ""
	resp := n.get("response")
	if resp != nil {
		if resp.kind != 's' {
			return "", nil, false
		}
		content = resp.str
	}
	if resp == nil && len(calls) == 0 {
		return "", nil, false
	}
	return content, calls, true
}
