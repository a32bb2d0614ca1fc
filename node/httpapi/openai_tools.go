package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/meshllm/meshllm/infer"
)

// maxToolDescriptionBytes bounds one tool's description (OpenAI documents
// none; long MCP tool descriptions stay well below it).
const maxToolDescriptionBytes = 16 << 10

// toolPlan is how a chat request's tools are served: offered to the model
// in its chat template, and its reply parsed in its tool-call format
// (infer.ModelInfo.ToolFormat). A nil *toolPlan offers and parses nothing.
type toolPlan struct {
	tools  []infer.Tool
	format infer.ToolFormat
	// single keeps only the first call of a reply (parallel_tool_calls:
	// false).
	single bool
}

// rendered is the tools to render the prompt with.
func (p *toolPlan) rendered() []infer.Tool {
	if p == nil {
		return nil
	}
	return p.tools
}

// stream returns a fresh splitter of the reply's content and calls.
func (p *toolPlan) stream() *infer.ToolStream { return p.format.NewStream(p.tools) }

// limit trims a reply's calls to what the request allows.
func (p *toolPlan) limit(calls []infer.ToolCall) []infer.ToolCall {
	if p != nil && p.single && len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// chatToolPlan checks a chat request's tools, tool_choice and
// parallel_tool_calls, and sets the constraint tool_choice needs (a
// required or named call, or the generic format's JSON reply) on sampling.
// It returns nil when the model is offered no tools: none given, or
// tool_choice "none".
func (s *Server) chatToolPlan(req *chatRequest, sampling *infer.Sampling) (*toolPlan, *apiError) {
	tools, e := toolsIn(req.Tools)
	if e != nil {
		return nil, e
	}
	choice, e := toolChoiceIn(req.ToolChoice, tools)
	if e != nil {
		return nil, e
	}
	if len(tools) == 0 || (choice.Mode == infer.ToolChoiceNone && choice.Function == "") {
		return nil, nil
	}
	format := infer.ToolFormat(s.gen.Info().ToolFormat)
	if !format.Known() {
		return nil, badRequest("tools", "%s does not support tool calls", s.gen.Info().Name)
	}
	// A reply the grammar writes holds one call unless the client asked
	// for parallel calls outright (llama.cpp's server does the same):
	// small models otherwise repeat calls until max_tokens cuts them.
	choice.Single = req.ParallelToolCalls == nil || !*req.ParallelToolCalls
	c, err := format.Constraint(tools, choice)
	if err != nil {
		return nil, badRequest("tool_choice", "%s", strings.TrimPrefix(err.Error(), infer.ErrBadRequest.Error()+": "))
	}
	if sampling.Constraint != nil {
		// One grammar per reply: a JSON reply and a tool call cannot both
		// be enforced (and under "auto", a JSON-only reply could never
		// call a tool).
		return nil, badRequest("response_format", "response_format json_object/json_schema cannot be combined with tools: send tool_choice \"none\", or no response_format")
	}
	sampling.Constraint = c
	return &toolPlan{tools: tools, format: format, single: req.ParallelToolCalls != nil && !*req.ParallelToolCalls}, nil
}

// toolsIn converts and checks a request's tools.
func toolsIn(in []chatTool) ([]infer.Tool, *apiError) {
	if len(in) > infer.MaxTools {
		return nil, badRequest("tools", "%d tools, at most %d", len(in), infer.MaxTools)
	}
	out := make([]infer.Tool, 0, len(in))
	for i, t := range in {
		switch {
		case t.Type != "function" && t.Type != "":
			return nil, badRequest("tools", "tools[%d].type %q is not supported: only function tools are", i, t.Type)
		case t.Function == nil:
			return nil, badRequest("tools", "tools[%d].function is required", i)
		case len(t.Function.Description) > maxToolDescriptionBytes:
			return nil, badRequest("tools", "tools[%d].function.description has %d bytes, at most %d", i, len(t.Function.Description), maxToolDescriptionBytes)
		}
		// strict is accepted either way: a call the engine is made to
		// write (tool_choice required or named) always follows the
		// schema; under "auto" a call that does not parse is content.
		out = append(out, infer.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if err := infer.ValidateTools(out); err != nil {
		return nil, badRequest("tools", "%s", strings.TrimPrefix(err.Error(), infer.ErrBadRequest.Error()+": "))
	}
	return out, nil
}

// toolChoiceIn decodes tool_choice: "auto", "none", "required", or
// {"type": "function", "function": {"name": ...}} naming one of tools.
func toolChoiceIn(raw json.RawMessage, tools []infer.Tool) (infer.ToolChoice, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return infer.ToolChoice{Mode: infer.ToolChoiceAuto}, nil
	}
	var choice infer.ToolChoice
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case infer.ToolChoiceAuto, infer.ToolChoiceNone, infer.ToolChoiceRequired:
			choice.Mode = mode
		default:
			return choice, badRequest("tool_choice", `tool_choice %q is not supported: use "auto", "none", "required" or {"type":"function","function":{"name":...}}`, mode)
		}
	} else {
		var obj struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return choice, badRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":...}}`)
		}
		switch {
		case obj.Type != "function":
			return choice, badRequest("tool_choice", "tool_choice of type %q is not supported: only function", obj.Type)
		case obj.Function == nil || obj.Function.Name == "":
			return choice, badRequest("tool_choice", "tool_choice.function.name is required")
		}
		choice = infer.ToolChoice{Mode: infer.ToolChoiceRequired, Function: obj.Function.Name}
	}
	forced := choice.Mode == infer.ToolChoiceRequired
	if forced && len(tools) == 0 {
		return choice, badRequest("tool_choice", "tool_choice %q needs tools", choiceLabel(choice))
	}
	if choice.Function != "" && !hasTool(tools, choice.Function) {
		return choice, badRequest("tool_choice", "tool_choice names function %q, which is not among the tools", choice.Function)
	}
	return choice, nil
}

func choiceLabel(c infer.ToolChoice) string {
	if c.Function != "" {
		return c.Function
	}
	return c.Mode
}

func hasTool(tools []infer.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// toolCallsIn converts an assistant message's tool calls: each a function
// call whose arguments are a JSON object encoded as a string ("" for no
// arguments).
func toolCallsIn(msg int, in []chatToolCall) ([]infer.ToolCall, *apiError) {
	out := make([]infer.ToolCall, 0, len(in))
	for j, c := range in {
		switch {
		case c.Type != "function" && c.Type != "":
			return nil, badRequest("messages", "messages[%d].tool_calls[%d].type %q is not supported: only function calls are", msg, j, c.Type)
		case c.Function.Name == "":
			return nil, badRequest("messages", "messages[%d].tool_calls[%d].function.name is required", msg, j)
		}
		args := bytes.TrimSpace([]byte(c.Function.Arguments))
		if len(args) == 0 {
			args = []byte("{}")
		}
		if !json.Valid(args) || args[0] != '{' {
			return nil, badRequest("messages", "messages[%d].tool_calls[%d].function.arguments must be a JSON object encoded as a string", msg, j)
		}
		out = append(out, infer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(args)})
	}
	return out, nil
}

// toolCallsOut converts a reply's tool calls to OpenAI's shape, the
// arguments a JSON string.
func toolCallsOut(calls []infer.ToolCall) []chatToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]chatToolCall, len(calls))
	for i, c := range calls {
		args := string(c.Arguments)
		if args == "" {
			args = "{}"
		}
		out[i] = chatToolCall{ID: c.ID, Type: "function", Function: chatToolFunction{Name: c.Name, Arguments: args}}
	}
	return out
}
