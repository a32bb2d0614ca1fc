package infer

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// TemplateError is a chat template's raise_exception: the template refused
// the conversation (say, "Conversation roles must alternate"). It wraps
// ErrBadRequest.
type TemplateError struct{ Message string }

func (e *TemplateError) Error() string { return "chat template: " + e.Message }

// Unwrap lets errors.Is(err, ErrBadRequest) match.
func (e *TemplateError) Unwrap() error { return ErrBadRequest }

// renderJinja renders a chat the way Hugging Face's apply_chat_template
// does: messages and tools in OpenAI's shape, add_generation_prompt,
// bos_token and eos_token, raise_exception and strftime_now.
func (f *ChatFormat) renderJinja(tmpl *jinja.Template, format ToolFormat, messages []Message, tools []Tool) (string, error) {
	budget := &renderBudget{}
	data := budget.globals()
	msgs, err := messagesValue(messages, format)
	if err != nil {
		return "", err
	}
	data["messages"] = msgs
	if len(tools) > 0 {
		tv, err := toolsValue(tools)
		if err != nil {
			return "", err
		}
		data["tools"] = tv
	}
	data["add_generation_prompt"] = jinja.NewBool(true)
	data["bos_token"] = jinja.NewString(f.bos)
	data["eos_token"] = jinja.NewString(f.eos)
	data["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := "raise_exception"
		if len(args) > 0 {
			msg = printable(args[0])
		}
		return jinja.Undefined(), &TemplateError{Message: msg}
	})
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now: want one format string")
		}
		return jinja.NewString(strftime(f.now(), args[0].AsString())), nil
	})

	out, err := safeRender(tmpl, data)
	if err != nil {
		var te *TemplateError
		if errors.As(err, &te) {
			return "", te
		}
		return "", BadRequestf("chat template: %v", err)
	}
	if len(out) > MaxPromptBytes {
		return "", BadRequestf("the rendered prompt has %d bytes, at most %d", len(out), MaxPromptBytes)
	}
	if f.addBOS && f.bos != "" {
		out = strings.TrimPrefix(out, f.bos) // the tokenizer adds it
	}
	return out, nil
}

// safeRender renders, turning a panic in the engine into an error.
func safeRender(tmpl *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("the template engine failed: %v", r)
		}
	}()
	return tmpl.RenderValues(data)
}

func printable(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}

// messagesValue converts a chat to the templates' messages: role and
// content; tool_calls ([{id, type, function: {name, arguments}}], the
// arguments an object) only on a message that has them; tool_call_id and
// name on a tool message that has them. For ToolFormatMistral, whose
// templates demand 9-character alphanumeric call IDs, IDs are mapped to
// such (the same ID always to the same one).
func messagesValue(messages []Message, format ToolFormat) (jinja.Value, error) {
	id := func(s string) string { return s }
	if format == ToolFormatMistral {
		id = mistralCallID
	}
	items := make([]jinja.Value, 0, len(messages))
	for i, m := range messages {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		dict.Set("content", jinja.NewString(m.Content))
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, 0, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args, err := argumentsObject(c.Arguments)
				if err != nil {
					return jinja.Undefined(), BadRequestf("message %d: tool call %d: arguments: %v", i, j, err)
				}
				fn := jsonObject("name", jsonString(c.Name), "arguments", args)
				call := jsonObject("id", jsonString(id(c.ID)), "type", jsonString("function"), "function", fn)
				calls = append(calls, call.value())
			}
			dict.Set("tool_calls", jinja.NewList(calls))
		}
		if m.Role == "tool" {
			if m.ToolCallID != "" {
				dict.Set("tool_call_id", jinja.NewString(id(m.ToolCallID)))
			}
			if m.Name != "" {
				dict.Set("name", jinja.NewString(m.Name))
			}
		}
		items = append(items, d)
	}
	return jinja.NewList(items), nil
}

// toolsValue converts tools to OpenAI's shape: [{type: "function",
// function: {name, description, parameters}}].
func toolsValue(tools []Tool) (jinja.Value, error) {
	items := make([]jinja.Value, 0, len(tools))
	for _, t := range tools {
		fn := jsonObject("name", jsonString(t.Name))
		if t.Description != "" {
			fn.set("description", jsonString(t.Description))
		}
		params, err := toolParameters(t)
		if err != nil {
			return jinja.Undefined(), err
		}
		if params != nil {
			fn.set("parameters", params)
		}
		items = append(items, jsonObject("type", jsonString("function"), "function", fn).value())
	}
	return jinja.NewList(items), nil
}

// mistralCallID maps a call ID to 9 letters and digits: unchanged when it
// is such already, else derived from its hash.
func mistralCallID(id string) string {
	ok := len(id) == 9
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			ok = false
		}
	}
	if ok {
		return id
	}
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	h := sha256.Sum256([]byte(id))
	out := make([]byte, 9)
	for i := range out {
		out[i] = alnum[int(h[i])%len(alnum)]
	}
	return string(out)
}

// The probe conversation NewChatFormat renders: a template that handles
// tools shows the tool, the call's argument and the result.
const (
	probeTool   = "probe_lookup"
	probeArg    = "probe-argument"
	probeResult = "probe-result"
)

func probeTemplate(f *ChatFormat, tmpl *jinja.Template, format ToolFormat) error {
	tools := []Tool{{
		Name:        probeTool,
		Description: "Looks a word up.",
		Parameters:  []byte(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`),
	}}
	messages := []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Look the word up."},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_probe", Name: probeTool, Arguments: []byte(`{"word":"` + probeArg + `"}`)}}},
		{Role: "tool", Content: probeResult, ToolCallID: "call_probe", Name: probeTool},
	}
	out, err := f.renderJinja(tmpl, format, messages, tools)
	if err != nil {
		return err
	}
	for _, want := range []string{probeTool, probeArg, probeResult} {
		if !strings.Contains(out, want) {
			return fmt.Errorf("the probe conversation rendered without %q", want)
		}
	}
	return nil
}
