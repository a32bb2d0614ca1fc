package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/meshllm/meshllm/infer"
)

// replyFilter splits a generated reply, fed as it streams, into content and
// tool calls; *infer.ToolStream is one. Write returns the content that can
// be shown now; Close returns the rest and the calls. Used by one goroutine.
type replyFilter interface {
	Write(text string) string
	Close() (string, []infer.ToolCall)
}

// toolFormat is the format the served model writes tool calls in; "" (or
// a format infer does not parse) means the model does no tool calls.
func (s *Server) toolFormat() infer.ToolFormat {
	return infer.ToolFormat(s.gen.Info().ToolFormat)
}

// toolsSupported reports whether requests may offer the model tools.
func (s *Server) toolsSupported() bool { return s.toolFormat().Known() }

// ollamaTools checks a chat request's tools and converts them: every entry
// of type "function" (or no type) with a valid, unique name and an object
// schema as parameters (infer.ValidateTools), for a model that does tool
// calls (Ollama's 400 "... does not support tools" otherwise).
func (s *Server) ollamaTools(model string, in []ollamaTool) ([]infer.Tool, *apiError) {
	if len(in) == 0 {
		return nil, nil
	}
	if !s.toolsSupported() {
		return nil, badRequest("tools", "%s does not support tools", model)
	}
	tools := make([]infer.Tool, 0, len(in))
	for i, t := range in {
		if t.Type != "" && t.Type != "function" {
			return nil, badRequest("tools", "tools[%d].type %q is not supported: use \"function\"", i, t.Type)
		}
		tools = append(tools, infer.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if err := infer.ValidateTools(tools); err != nil {
		return nil, badRequest("tools", "%s", trimBadRequest(err))
	}
	return tools, nil
}

// ollamaToolConstraint is the constraint tools need without a format: nil,
// except for models in the generic format, whose reply must be the JSON
// object that either calls one tool or answers (infer's "auto" choice,
// one call: a grammar that allows a list lets small models repeat calls
// until num_predict cuts them).
func (s *Server) ollamaToolConstraint(tools []infer.Tool) (*infer.Constraint, *apiError) {
	if len(tools) == 0 {
		return nil, nil
	}
	c, err := s.toolFormat().Constraint(tools, infer.ToolChoice{Mode: infer.ToolChoiceAuto, Single: true})
	if err != nil {
		return nil, badRequest("tools", "%s", trimBadRequest(err))
	}
	return c, nil
}

// ollamaReplyFilter is the splitter of a reply to a request that offered
// tools, or nil when it offered none (the reply is all content).
func (s *Server) ollamaReplyFilter(tools []infer.Tool) replyFilter {
	if len(tools) == 0 {
		return nil
	}
	return s.toolFormat().NewStream(tools)
}

// ollamaCallsIn converts message i's tool calls: each names a function
// and has arguments that are a JSON object (absent: {}).
func ollamaCallsIn(i int, in []ollamaToolCall) ([]infer.ToolCall, *apiError) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]infer.ToolCall, 0, len(in))
	for k, c := range in {
		if c.Function.Name == "" {
			return nil, badRequest("messages", "messages[%d].tool_calls[%d].function.name is required", i, k)
		}
		args := bytes.TrimSpace(c.Function.Arguments)
		switch {
		case len(args) == 0 || string(args) == "null":
			args = []byte("{}")
		case args[0] != '{' || !json.Valid(args):
			return nil, badRequest("messages", "messages[%d].tool_calls[%d].function.arguments must be a JSON object", i, k)
		}
		out = append(out, infer.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(args)})
	}
	return out, nil
}

// ollamaCallsOut converts a reply's tool calls to Ollama's shape, numbering
// them from first (the calls the reply made before).
func (s *Server) ollamaCallsOut(first int, in []infer.ToolCall) []ollamaToolCall {
	if len(in) == 0 {
		return nil
	}
	out := make([]ollamaToolCall, len(in))
	for i, c := range in {
		id := c.ID
		if id == "" {
			id = s.newID("call")
		}
		args := c.Arguments
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		out[i] = ollamaToolCall{ID: id, Function: ollamaCallFunction{Index: first + i, Name: c.Name, Arguments: args}}
	}
	return out
}

// trimBadRequest is err's message without infer's "bad request: " prefix.
func trimBadRequest(err error) string {
	msg := err.Error()
	if p := infer.ErrBadRequest.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
