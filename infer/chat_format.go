package infer

import (
	"errors"
	"fmt"
	"time"

	"github.com/ardanlabs/jinja"
)

// ChatFormat is how one model's chats become prompts and in which format
// its replies carry tool calls. An engine builds it once, when it loads the
// model (NewChatFormat), and renders every request with it. It is
// immutable and safe for concurrent use.
//
// A chat without tools (no tools offered, no tool messages, no assistant
// tool calls) renders with the model's ChatTemplate family exactly as
// ChatTemplate.Render does, so plain prompts (and the prefix caches built
// on them) do not change. A chat with tools renders with the model's own
// Jinja chat template when it renders tools in a format this package
// parses (ToolFormat is then that format); otherwise with the family
// renderer and ToolFormatGeneric (the tools described in a system
// message, the reply asked for as JSON).
type ChatFormat struct {
	family   ChatTemplate
	tools    ToolFormat
	tmpl     *jinja.Template // guarded; nil when tools use the generic format
	jinjaErr error           // why tmpl is nil
	bos, eos string
	addBOS   bool
	now      func() time.Time
}

// ChatFormatOptions are what a chat template needs to know about the
// model beyond its text.
type ChatFormatOptions struct {
	// BOS and EOS are the text of the model's begin- and end-of-sequence
	// tokens (the templates' bos_token and eos_token).
	BOS, EOS string
	// AddBOS tells that the tokenizer adds BOS: a BOS the template writes
	// at the start of the prompt is then removed, so it is not doubled.
	AddBOS bool
	// Now is strftime_now's clock; nil means time.Now.
	Now func() time.Time
}

// errNoToolTemplate is ChatFormat.JinjaError for a template that does not
// render tools in a known format.
var errNoToolTemplate = errors.New("the chat template does not render tools in a known tool-call format")

// NewChatFormat returns the chat format of a model whose
// tokenizer.chat_template is template (Jinja text, a family name, or "").
// It compiles the template and renders a probe conversation with a tool
// call and a tool result; a template that fails (or is refused by the
// guard, see chat_guard.go) leaves the model on ToolFormatGeneric, and
// JinjaError says why.
func NewChatFormat(template string, opts ChatFormatOptions) *ChatFormat {
	f := &ChatFormat{
		family: DetectChatTemplate(template),
		tools:  ToolFormatGeneric,
		bos:    opts.BOS,
		eos:    opts.EOS,
		addBOS: opts.AddBOS,
		now:    opts.Now,
	}
	if f.now == nil {
		f.now = time.Now
	}
	native := DetectToolFormat(template)
	if native == "" {
		f.jinjaErr = errNoToolTemplate
		return f
	}
	tmpl, err := compileGuarded(template)
	if err == nil {
		err = probeTemplate(f, tmpl, native)
	}
	if err != nil {
		f.jinjaErr = fmt.Errorf("chat template not used for tools (%s format): %w", native, err)
		return f
	}
	f.tmpl, f.tools = tmpl, native
	return f
}

// compileGuarded vets, guards and compiles a template (a panic in the
// engine's parser is an error).
func compileGuarded(src string) (tmpl *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tmpl, err = nil, fmt.Errorf("the template engine failed: %v", r)
		}
	}()
	if len(src) > maxTemplateBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(src), maxTemplateBytes)
	}
	segs, err := scanTemplate(src)
	if err != nil {
		return nil, err
	}
	if err := vetTemplate(segs); err != nil {
		return nil, err
	}
	guarded, err := guardTemplate(src, segs)
	if err != nil {
		return nil, err
	}
	return jinja.Compile(guarded)
}

// Family is the ChatTemplate family plain chats render with.
func (f *ChatFormat) Family() ChatTemplate { return f.family }

// ToolFormat is the format the model's tool calls are parsed in.
func (f *ChatFormat) ToolFormat() ToolFormat { return f.tools }

// UsesJinja tells whether chats with tools render with the model's own
// chat template.
func (f *ChatFormat) UsesJinja() bool { return f.tmpl != nil }

// JinjaError says why chats with tools do not render with the model's own
// chat template (nil when they do).
func (f *ChatFormat) JinjaError() error { return f.jinjaErr }

// Render turns messages, and the tools the model may call (nil for none),
// into the prompt text, ending where the assistant's reply begins. Bad
// messages or tools, and a template that raises an exception or fails,
// give an ErrBadRequest.
func (f *ChatFormat) Render(messages []Message, tools []Tool) (string, error) {
	if err := ValidateTools(tools); err != nil {
		return "", err
	}
	if len(tools) == 0 && !usesTools(messages) {
		return f.family.Render(messages)
	}
	if err := validateToolMessages(messages); err != nil {
		return "", err
	}
	size := 0
	for _, t := range tools {
		size += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if size > MaxPromptBytes {
		return "", BadRequestf("the tools hold %d bytes, at most %d", size, MaxPromptBytes)
	}
	if f.tmpl != nil {
		return f.renderJinja(f.tmpl, f.tools, messages, tools)
	}
	return f.family.Render(withGenericTools(messages, tools))
}

// usesTools tells whether a chat has tool messages or assistant tool calls.
func usesTools(messages []Message) bool {
	for _, m := range messages {
		if m.Role == "tool" || len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// validateToolMessages checks the tool parts of a chat: tool calls only on
// assistant messages, with names and object arguments, and bounded sizes.
func validateToolMessages(messages []Message) error {
	if len(messages) == 0 {
		return BadRequestf("no messages")
	}
	size := 0
	for i, m := range messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return BadRequestf("message %d: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
		size += len(m.Content)
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return BadRequestf("message %d: only assistant messages have tool_calls", i)
		}
		if len(m.ToolCalls) > maxToolCalls {
			return BadRequestf("message %d: %d tool calls, at most %d", i, len(m.ToolCalls), maxToolCalls)
		}
		for j, c := range m.ToolCalls {
			if c.Name == "" || len(c.Name) > 4*MaxToolNameBytes {
				return BadRequestf("message %d: tool call %d: a name must have 1 to %d bytes", i, j, 4*MaxToolNameBytes)
			}
			if _, err := argumentsObject(c.Arguments); err != nil {
				return BadRequestf("message %d: tool call %d (%s): arguments: %v", i, j, c.Name, err)
			}
			size += len(c.Arguments)
		}
	}
	if size > MaxPromptBytes {
		return BadRequestf("the messages hold %d bytes, at most %d", size, MaxPromptBytes)
	}
	return nil
}
