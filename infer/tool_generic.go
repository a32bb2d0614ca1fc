package infer

import (
	"bytes"
	"strings"
)

// The generic tool format is for models whose chat template does not
// render tools (or that have none, like base models): the tools are
// described in the system message, which asks for one JSON object as the
// reply, and the family renderer renders the chat. Earlier tool calls are
// shown as the JSON the model is asked to write, and tool results as user
// turns of <tool_response> blocks (as Qwen's templates render them).

// GenericToolPrompt is the system text that offers tools to a model in
// ToolFormatGeneric.
func GenericToolPrompt(tools []Tool) string {
	var b bytes.Buffer
	b.WriteString("You can call these tools (functions); each is given with the JSON schema of its arguments:\n")
	for _, t := range tools {
		fn := jsonObject("name", jsonString(t.Name))
		if t.Description != "" {
			fn.set("description", jsonString(t.Description))
		}
		params, _ := toolParameters(t) // validated by Render
		if params == nil {
			params = jsonObject("type", jsonString("object"))
		}
		fn.set("parameters", params)
		b.WriteByte('\n')
		fn.encode(&b)
	}
	b.WriteString("\n\nReply with one JSON object and nothing else. To call tools: " +
		`{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments>}}]}` +
		". To answer without calling a tool: " + `{"response": "<your answer>"}` +
		". Tool results come back in <tool_response></tool_response> tags.")
	return b.String()
}

// withGenericTools adds the generic tool prompt to a chat's system
// message (or puts one first).
func withGenericTools(messages []Message, tools []Tool) []Message {
	if len(tools) == 0 {
		return messages
	}
	prompt := GenericToolPrompt(tools)
	out := make([]Message, 0, len(messages)+1)
	if len(messages) > 0 && messages[0].Role == "system" {
		sys := messages[0]
		if sys.Content != "" {
			sys.Content += "\n\n"
		}
		sys.Content += prompt
		out = append(out, sys)
		return append(out, messages[1:]...)
	}
	out = append(out, Message{Role: "system", Content: prompt})
	return append(out, messages...)
}

// flattenToolMessages rewrites a chat's tool parts as text for the family
// renderers: an assistant's tool calls follow its content as
// {"tool_calls": [...]}, and each run of tool messages becomes one user
// message of <tool_response> blocks. Arguments must be valid (see
// validateToolMessages).
func flattenToolMessages(messages []Message) []Message {
	out := make([]Message, 0, len(messages))
	for i := 0; i < len(messages); i++ {
		m := messages[i]
		switch {
		case m.Role == "tool":
			var b strings.Builder
			for ; i < len(messages) && messages[i].Role == "tool"; i++ {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString("<tool_response>\n" + messages[i].Content + "\n</tool_response>")
			}
			i--
			out = append(out, Message{Role: "user", Content: b.String()})
		case len(m.ToolCalls) > 0:
			calls := &jsonNode{kind: 'a'}
			for _, c := range m.ToolCalls {
				args, err := argumentsObject(c.Arguments)
				if err != nil {
					args = &jsonNode{kind: 'o'}
				}
				calls.vals = append(calls.vals, jsonObject("name", jsonString(c.Name), "arguments", args))
			}
			var b bytes.Buffer
			if m.Content != "" {
				b.WriteString(m.Content + "\n")
			}
			jsonObject("tool_calls", calls).encode(&b)
			out = append(out, Message{Role: "assistant", Content: b.String()})
		default:
			out = append(out, Message{Role: m.Role, Content: m.Content})
		}
	}
	return out
}
