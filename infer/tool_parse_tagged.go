package infer

import "strings"

// parseTagged parses <tool_call>...</tool_call> blocks, each holding a
// JSON call, a <function=...> call or a GLM call. A block that does not
// parse, an unterminated one, and text between blocks are content; white
// space next to a call is dropped.
func parseTagged(r string, tools []Tool) (string, []ToolCall, bool) {
	const open, end = markerTagged, "</tool_call>"
	type part struct {
		text string
		call bool // a parsed call (text is then unused)
	}
	var parts []part
	var calls []ToolCall
	for r != "" {
		if !strings.HasPrefix(r, open) {
			next := strings.Index(r, open)
			if next < 0 {
				next = len(r)
			}
			parts = append(parts, part{text: r[:next]})
			r = r[next:]
			continue
		}
		n := strings.Index(r[len(open):], end)
		if n < 0 {
			parts = append(parts, part{text: r})
			break
		}
		block := r[:len(open)+n+len(end)]
		if call, ok := parseTaggedCall(r[len(open):len(open)+n], tools); ok && len(calls) < maxToolCalls {
			calls = append(calls, call)
			parts = append(parts, part{call: true})
		} else {
			parts = append(parts, part{text: block})
		}
		r = r[len(block):]
	}
	var content strings.Builder
	for i, p := range parts {
		text := p.text
		if i > 0 && parts[i-1].call {
			text = strings.TrimLeft(text, spaces)
		}
		if i+1 < len(parts) && parts[i+1].call {
			text = strings.TrimRight(text, spaces)
		}
		content.WriteString(text)
	}
	return content.String(), calls, len(parts) > 0 && !parts[0].call
}

func parseTaggedCall(inner string, tools []Tool) (ToolCall, bool) {
	t := strings.Trim(inner, spaces)
	switch {
	case strings.HasPrefix(t, "{"):
		n, err := parseJSON([]byte(t))
		if err != nil {
			return ToolCall{}, false
		}
		return callFromObject(n, false)
	case strings.HasPrefix(t, "<function="):
		return parseXMLCall(t, tools)
	}
	return parseGLMCall(t, tools)
}

// callFromObject reads {"name": ..., "arguments"|"parameters": ...}; with
// needArgs, one of those keys must be present.
func callFromObject(n *jsonNode, needArgs bool) (ToolCall, bool) {
	if n.kind != 'o' {
		return ToolCall{}, false
	}
	name := n.get("name")
	if name == nil || name.kind != 's' || !validCallName(name.str) {
		return ToolCall{}, false
	}
	args := n.get("arguments")
	if args == nil {
		args = n.get("parameters")
	}
	if args == nil && needArgs {
		return ToolCall{}, false
	}
	var raw []byte
	if args != nil {
		raw = args.bytes()
	}
	obj, err := argumentsObject(raw)
	if err != nil {
		return ToolCall{}, false
	}
	return ToolCall{Name: name.str, Arguments: obj.bytes()}, true
}

// validCallName accepts a name a model wrote: 1 to 4*MaxToolNameBytes
// bytes without white space, quotes or angle brackets.
func validCallName(s string) bool {
	return s != "" && len(s) <= 4*MaxToolNameBytes && !strings.ContainsAny(s, " \t\r\n\"'<>[]{}")
}

// parseXMLCall parses <function=NAME><parameter=K>V</parameter>...</function>.
func parseXMLCall(t string, tools []Tool) (ToolCall, bool) {
	t = strings.TrimPrefix(t, "<function=")
	gt := strings.IndexByte(t, '>')
	if gt < 0 || !strings.HasSuffix(t, "</function>") {
		return ToolCall{}, false
	}
	name := strings.TrimSpace(t[:gt])
	if !validCallName(name) {
		return ToolCall{}, false
	}
	body := strings.TrimSuffix(t[gt+1:], "</function>")
	args := &jsonNode{kind: 'o'}
	for {
		body = strings.TrimLeft(body, spaces)
		if body == "" {
			break
		}
		if !strings.HasPrefix(body, "<parameter=") {
			return ToolCall{}, false
		}
		body = body[len("<parameter="):]
		gt := strings.IndexByte(body, '>')
		stop := strings.Index(body, "</parameter>")
		if gt < 0 || stop < gt {
			return ToolCall{}, false
		}
		key := strings.TrimSpace(body[:gt])
		if key == "" {
			return ToolCall{}, false
		}
		v := body[gt+1 : stop]
		v = strings.TrimPrefix(v, "\n")
		v = strings.TrimSuffix(v, "\n")
		args.set(key, typedArgument(tools, name, key, v))
		body = body[stop+len("</parameter>"):]
	}
	return ToolCall{Name: name, Arguments: args.bytes()}, true
}

// parseGLMCall parses NAME<arg_key>K</arg_key><arg_value>V</arg_value>...
func parseGLMCall(t string, tools []Tool) (ToolCall, bool) {
	i := strings.Index(t, "<arg_key>")
	if i < 0 {
		i = len(t)
	}
	name := strings.TrimSpace(t[:i])
	if !validCallName(name) {
		return ToolCall{}, false
	}
	body := t[i:]
	args := &jsonNode{kind: 'o'}
	for {
		body = strings.TrimLeft(body, spaces)
		if body == "" {
			break
		}
		k, rest, ok := cutTag(body, "<arg_key>", "</arg_key>")
		if !ok {
			return ToolCall{}, false
		}
		v, rest, ok := cutTag(strings.TrimLeft(rest, spaces), "<arg_value>", "</arg_value>")
		if !ok || strings.TrimSpace(k) == "" {
			return ToolCall{}, false
		}
		key := strings.TrimSpace(k)
		args.set(key, typedArgument(tools, name, key, v))
		body = rest
	}
	return ToolCall{Name: name, Arguments: args.bytes()}, true
}

// cutTag cuts open...close off the start of s.
func cutTag(s, open, close string) (inner, rest string, ok bool) {
	if !strings.HasPrefix(s, open) {
		return "", "", false
	}
	s = s[len(open):]
	n := strings.Index(s, close)
	if n < 0 {
		return "", "", false
	}
	return s[:n], s[n+len(close):], true
}

// typedArgument types an argument written as text: a string when the
// tool's schema says so, else its JSON value when it is one, else a
// string.
func typedArgument(tools []Tool, fn, key, v string) *jsonNode {
	if propertyType(tools, fn, key) != "string" {
		if n, err := parseJSON([]byte(strings.TrimSpace(v))); err == nil {
			return n
		}
	}
	return jsonString(v)
}

// propertyType is the JSON schema type of a tool's argument ("" if
// unknown).
func propertyType(tools []Tool, fn, key string) string {
	for _, t := range tools {
		if t.Name != fn {
			continue
		}
		p, err := toolParameters(t)
		if err != nil {
			return ""
		}
		if typ := p.get("properties").get(key).get("type"); typ != nil && typ.kind == 's' {
			return typ.str
		}
	}
	return ""
}
