package infer

import (
	"crypto/rand"
	"strings"
)

// ToolFormat names how a model writes tool calls in its replies. A model's
// format is chosen once, when it is loaded (NewChatFormat), from its chat
// template, and ModelInfo.ToolFormat names it, so a client of an engine
// (the HTTP API, a forwarding peer) parses replies and builds constraints
// with the pure functions of this package.
//
// Every engine has a format: a model whose chat template does not render
// tools (or that has none) uses ToolFormatGeneric, which describes the
// tools in a system message and asks for JSON. The empty ToolFormat (or an
// unknown one) means "no tool calls": replies are all content.
type ToolFormat string

// Tool-call formats.
const (
	// ToolFormatHermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
	// one block per call (Qwen2.5, Qwen3, Hermes, many fine-tunes).
	ToolFormatHermes ToolFormat = "hermes"
	// ToolFormatQwenXML: <tool_call><function=NAME><parameter=K>V</parameter>
	// </function></tool_call> (Qwen3-Coder, Qwen3.5, Nemotron 3).
	ToolFormatQwenXML ToolFormat = "qwen3-coder"
	// ToolFormatGLM: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
	// (GLM 4.5 and later).
	ToolFormatGLM ToolFormat = "glm"
	// ToolFormatLlama3: the reply is {"name": ..., "parameters": {...}}
	// (Llama 3.1-3.3 JSON tool calling; "arguments" is accepted too).
	ToolFormatLlama3 ToolFormat = "llama3-json"
	// ToolFormatMistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}]
	// (Mistral 7B v0.3, Mistral Nemo, Mistral Small 3).
	ToolFormatMistral ToolFormat = "mistral"
	// ToolFormatMistralArgs: [TOOL_CALLS]NAME[ARGS]{...} (Mistral's
	// v11+ tokenizers: Ministral 3, Mistral Small 3.2, Magistral, Devstral).
	ToolFormatMistralArgs ToolFormat = "mistral-args"
	// ToolFormatGeneric: the reply is {"tool_calls": [{"name": ...,
	// "arguments": {...}}]} or {"response": "..."}, as a system message
	// asks; see GenericToolPrompt.
	ToolFormatGeneric ToolFormat = "generic"
)

// Bounds on what a request may offer.
const (
	// MaxTools bounds a request's tools (OpenAI's limit).
	MaxTools = 128
	// MaxToolNameBytes bounds a tool's name.
	MaxToolNameBytes = 64
	// MaxToolCallsBytes bounds the tool-call part of a reply that is held
	// back to be parsed; beyond it, the reply is content.
	MaxToolCallsBytes = 1 << 20
	// maxToolCalls bounds the calls one reply or message may make.
	maxToolCalls = 128
)

// ToolChoice is a request's tool_choice: Mode is ToolChoiceAuto (or ""),
// ToolChoiceNone or ToolChoiceRequired; a non-empty Function names the
// function the reply must call (OpenAI's {"type": "function", "function":
// {"name": ...}}), whatever Mode says. Single asks for at most one call
// (OpenAI's parallel_tool_calls: false); the formats whose constrained
// reply is one block (Hermes, Llama 3, [ARGS]) make one call anyway.
type ToolChoice struct {
	Mode     string `json:"mode,omitempty"`
	Function string `json:"function,omitempty"`
	Single   bool   `json:"single,omitempty"`
}

// Tool choice modes.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// DetectToolFormat returns the format a chat template's model writes tool
// calls in, from the markers its Jinja text contains, or "" when the
// template does not render tools (or uses a format this package does not
// parse: the model then gets ToolFormatGeneric; see NewChatFormat).
func DetectToolFormat(template string) ToolFormat {
	has := func(s string) bool { return strings.Contains(template, s) }
	if !has("tools") && !has("tool_calls") {
		return ""
	}
	switch {
	case has("<tool_call>") && has("<function="):
		return ToolFormatQwenXML
	case has("<tool_call>") && has("<arg_key>"):
		return ToolFormatGLM
	case has("<tool_call>"):
		return ToolFormatHermes
	case has("[TOOL_CALLS]") && has("[ARGS]"):
		return ToolFormatMistralArgs
	case has("[TOOL_CALLS]"):
		return ToolFormatMistral
	case has("<|start_header_id|>") && (has(`"parameters"`) || has("<|python_tag|>")):
		return ToolFormatLlama3
	}
	return ""
}

// Known reports whether f is a format this package parses.
func (f ToolFormat) Known() bool {
	switch f {
	case ToolFormatHermes, ToolFormatQwenXML, ToolFormatGLM, ToolFormatLlama3,
		ToolFormatMistral, ToolFormatMistralArgs, ToolFormatGeneric:
		return true
	}
	return false
}

// ValidateTools checks the tools a request offers: at most MaxTools, each
// with a valid, unique name and parameters that are a JSON object schema
// (or absent) of at most MaxSchemaBytes. The error wraps ErrBadRequest.
func ValidateTools(tools []Tool) error {
	if len(tools) > MaxTools {
		return BadRequestf("%d tools, at most %d", len(tools), MaxTools)
	}
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if err := validToolName(t.Name); err != nil {
			return BadRequestf("tools[%d]: %v", i, err)
		}
		if seen[t.Name] {
			return BadRequestf("tools[%d]: duplicate name %q", i, t.Name)
		}
		seen[t.Name] = true
		if _, err := toolParameters(t); err != nil {
			return BadRequestf("tools[%d] (%s): parameters: %v", i, t.Name, err)
		}
	}
	return nil
}

// validToolName accepts 1 to MaxToolNameBytes of letters, digits and
// "_-.:/" (OpenAI allows [a-zA-Z0-9_-]; MCP clients add the others).
func validToolName(name string) error {
	if name == "" || len(name) > MaxToolNameBytes {
		return BadRequestf("a tool name must have 1 to %d bytes, got %d", MaxToolNameBytes, len(name))
	}
	for _, c := range []byte(name) {
		if !isIdentByte(c, false) && !strings.ContainsRune("-.:/", rune(c)) {
			return BadRequestf("tool name %q: only letters, digits and _-.:/ are allowed", name)
		}
	}
	return nil
}

// toolParameters decodes a tool's parameter schema (nil when absent).
func toolParameters(t Tool) (*jsonNode, error) {
	raw := strings.TrimSpace(string(t.Parameters))
	if raw == "" || raw == "null" {
		return nil, nil
	}
	if len(raw) > MaxSchemaBytes {
		return nil, BadRequestf("%d bytes, at most %d", len(raw), MaxSchemaBytes)
	}
	n, err := parseJSON([]byte(raw))
	if err != nil {
		return nil, BadRequestf("%v", err)
	}
	if n.kind != 'o' {
		return nil, BadRequestf("not a JSON object")
	}
	return n, nil
}

// newToolCallID returns a fresh, unique tool call ID ("call_" and 26
// random letters and digits).
func newToolCallID() string { return "call_" + rand.Text() }
