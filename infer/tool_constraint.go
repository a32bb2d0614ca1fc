package infer

import (
	"strconv"
	"strings"
)

// Constraint returns the Constraint that makes a reply in format f obey a
// request's tool_choice, or nil when none is needed:
//
//   - "none" (or no tools with "auto"): nil — render no tools, parse nothing;
//   - "auto": nil, except for ToolFormatGeneric, whose reply is then one
//     JSON object, either {"tool_calls": [...]} or {"response": "..."};
//   - "required", or a named function: the reply is a call (of that
//     function, or of one of the tools), written in the model's format:
//     Hermes <tool_call>\n{"name", "arguments"}\n</tool_call>, Llama 3
//     {"name", "parameters"}, Mistral [TOOL_CALLS][{...}, ...],
//     [TOOL_CALLS]NAME[ARGS]{...} (a named function, or a single tool, only),
//     generic {"tool_calls": [...]}.
//
// The XML formats (ToolFormatQwenXML, ToolFormatGLM) cannot be constrained
// with a JSON schema: "required" and named functions are an ErrBadRequest
// for them, as are a named function that is not among tools and a schema
// beyond MaxSchemaBytes.
func (f ToolFormat) Constraint(tools []Tool, choice ToolChoice) (*Constraint, error) {
	forced := choice.Function != "" || choice.Mode == ToolChoiceRequired
	switch choice.Mode {
	case "", ToolChoiceAuto, ToolChoiceRequired:
	case ToolChoiceNone:
		if choice.Function == "" {
			return nil, nil
		}
	default:
		return nil, BadRequestf("tool_choice %q: want auto, none, required or a function", choice.Mode)
	}
	if err := ValidateTools(tools); err != nil {
		return nil, err
	}
	if len(tools) == 0 {
		if forced {
			return nil, BadRequestf("tool_choice asks for a tool call, but the request has no tools")
		}
		return nil, nil
	}
	selected := tools
	if choice.Function != "" {
		selected = nil
		for _, t := range tools {
			if t.Name == choice.Function {
				selected = []Tool{t}
			}
		}
		if selected == nil {
			return nil, BadRequestf("tool_choice names function %q, which is not among the tools", choice.Function)
		}
	}
	if !forced && f != ToolFormatGeneric {
		return nil, nil
	}

	var c Constraint
	var schema *jsonNode
	var err error
	switch f {
	case ToolFormatGeneric:
		var calls *jsonNode
		if calls, err = callsSchema(selected, "arguments", true, choice.Single); err == nil {
			schema = calls
			if !forced {
				resp := jsonObject("type", jsonString("object"),
					"properties", jsonObject("response", jsonObject("type", jsonString("string"))),
					"required", stringArray("response"))
				schema = anyOf(calls, resp)
				hoist(schema, calls)
			}
		}
	case ToolFormatHermes:
		c.Prefix, c.Suffix = "<tool_call>\n", "\n</tool_call>"
		schema, err = callsSchema(selected, "arguments", false, true)
	case ToolFormatLlama3:
		schema, err = callsSchema(selected, "parameters", false, true)
	case ToolFormatMistral:
		c.Prefix = markerMistral
		schema, err = callsSchema(selected, "arguments", false, true)
		if err == nil {
			arr := callArray(schema, choice.Single)
			hoist(arr, schema)
			schema = arr
		}
	case ToolFormatMistralArgs:
		if len(selected) != 1 {
			return nil, BadRequestf("tool_choice %q with several tools is not supported by this model's tool-call format (%s): name one function", ToolChoiceRequired, f)
		}
		c.Prefix = markerMistral + selected[0].Name + "[ARGS]"
		schema, err = argumentsSchema(selected[0])
	default:
		return nil, BadRequestf("tool_choice %q is not supported by this model's tool-call format (%q)", choiceName(choice), string(f))
	}
	if err != nil {
		return nil, err
	}
	c.JSONSchema = string(schema.bytes())
	if len(c.JSONSchema) > MaxSchemaBytes {
		return nil, BadRequestf("the tools' schema for tool_choice is %d bytes, at most %d", len(c.JSONSchema), MaxSchemaBytes)
	}
	if len(c.Prefix) > MaxAffixBytes {
		return nil, BadRequestf("tool_choice: the call prefix is %d bytes, at most %d", len(c.Prefix), MaxAffixBytes)
	}
	return &c, nil
}

func choiceName(c ToolChoice) string {
	if c.Function != "" {
		return c.Function
	}
	return c.Mode
}

// callsSchema is the schema of one call of one of tools: {"name": const,
// argsKey: parameters}; with array, of {"tool_calls": [calls...]} (one
// call when single). Definitions ($defs, definitions) of the tools'
// schemas move to the root.
func callsSchema(tools []Tool, argsKey string, array, single bool) (*jsonNode, error) {
	root := &jsonNode{kind: 'o'}
	var alts []*jsonNode
	for i, t := range tools {
		params, err := argumentsSchema(t)
		if err != nil {
			return nil, err
		}
		params = relocate(params, root, i)
		alts = append(alts, jsonObject("type", jsonString("object"),
			"properties", jsonObject("name", jsonObject("const", jsonString(t.Name)), argsKey, params),
			"required", stringArray("name", argsKey)))
	}
	call := alts[0]
	if len(alts) > 1 {
		call = anyOf(alts...)
	}
	if array {
		call = jsonObject("type", jsonString("object"),
			"properties", jsonObject("tool_calls", callArray(call, single)),
			"required", stringArray("tool_calls"))
	}
	hoist(call, root)
	return call, nil
}

// argumentsSchema is a tool's parameters, or any object when it has none.
func argumentsSchema(t Tool) (*jsonNode, error) {
	params, err := toolParameters(t)
	if err != nil {
		return nil, BadRequestf("tool %s: parameters: %v", t.Name, err)
	}
	if params == nil {
		params = jsonObject("type", jsonString("object"))
	}
	return params, nil
}

// relocate prepares tool i's parameter schema to sit inside a larger
// schema: its $defs and definitions move to root's $defs as "t<i>_<name>",
// and its local references follow (a reference to its own root or into it
// goes to a copy of it in $defs as "t<i>").
func relocate(params, root *jsonNode, i int) *jsonNode {
	prefix := "t" + strconv.Itoa(i)
	defs := root.get("$defs")
	addDef := func(name string, n *jsonNode) {
		if defs == nil {
			defs = &jsonNode{kind: 'o'}
			root.set("$defs", defs)
		}
		defs.set(name, n)
	}
	params = cloneJSON(params)
	var moved []string
	for _, key := range []string{"$defs", "definitions"} {
		if d := params.get(key); d != nil && d.kind == 'o' {
			for j, k := range d.keys {
				addDef(prefix+"_"+k, d.vals[j])
				moved = append(moved, k)
			}
			params.del(key)
		}
	}
	needSelf := false
	rewriteRefs(params, func(ref string) string {
		for _, p := range []string{"#/$defs/", "#/definitions/"} {
			if name, ok := strings.CutPrefix(ref, p); ok {
				return "#/$defs/" + prefix + "_" + name
			}
		}
		if ref == "#" || strings.HasPrefix(ref, "#/") {
			needSelf = true
			return "#/$defs/" + prefix + strings.TrimPrefix(ref, "#")
		}
		return ref
	})
	for _, k := range moved {
		rewriteRefs(defs.get(prefix+"_"+k), func(ref string) string {
			for _, p := range []string{"#/$defs/", "#/definitions/"} {
				if name, ok := strings.CutPrefix(ref, p); ok {
					return "#/$defs/" + prefix + "_" + name
				}
			}
			return ref
		})
	}
	if needSelf {
		addDef(prefix, params)
	}
	return params
}

func rewriteRefs(n *jsonNode, fn func(string) string) {
	if n == nil {
		return
	}
	if n.kind == 'o' {
		for j, k := range n.keys {
			if k == "$ref" && n.vals[j].kind == 's' {
				n.vals[j] = jsonString(fn(n.vals[j].str))
				continue
			}
			rewriteRefs(n.vals[j], fn)
		}
	}
	if n.kind == 'a' {
		for _, v := range n.vals {
			rewriteRefs(v, fn)
		}
	}
}

// hoist moves from's $defs to to's root.
func hoist(to, from *jsonNode) {
	d := from.get("$defs")
	if d == nil {
		return
	}
	if from != to {
		from.del("$defs")
	}
	to.set("$defs", d)
}

func cloneJSON(n *jsonNode) *jsonNode {
	c := *n
	c.keys = append([]string(nil), n.keys...)
	c.vals = make([]*jsonNode, len(n.vals))
	for i, v := range n.vals {
		c.vals[i] = cloneJSON(v)
	}
	return &c
}

// callArray is the schema of an array of one or more calls (exactly one
// when single).
func callArray(call *jsonNode, single bool) *jsonNode {
	one := &jsonNode{kind: 'n', str: "1", isInt: true}
	a := jsonObject("type", jsonString("array"), "items", call, "minItems", one)
	if single {
		a.set("maxItems", one)
	}
	return a
}

func anyOf(alts ...*jsonNode) *jsonNode {
	return jsonObject("anyOf", &jsonNode{kind: 'a', vals: alts})
}

func stringArray(ss ...string) *jsonNode {
	n := &jsonNode{kind: 'a'}
	for _, s := range ss {
		n.vals = append(n.vals, jsonString(s))
	}
	return n
}
