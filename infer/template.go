package infer

import (
	"strings"
)

// ChatTemplate names a chat template family. The names are llama.cpp's
// (llama_chat_apply_template), so a family can also be chosen by name.
//
// Detection and rendering follow llama.cpp's llm_chat_detect_template and
// llm_chat_apply_template: the Jinja text of tokenizer.chat_template is not
// executed, it is recognised by marker strings, and the family is rendered
// in Go. That covers the templates of the common model families exactly for
// plain text messages (no tools, no images). Families llama.cpp knows but
// this package does not render fall back to TemplatePlain, as does a model
// without a template. Chats with tools render with the model's own Jinja
// template instead, where it handles them: see ChatFormat.
//
// The BOS token is not part of a rendered prompt: the tokenizer adds it.
type ChatTemplate string

// Chat template families.
const (
	// TemplatePlain is the fallback for models without a (known) chat
	// template, such as base models: the message contents joined by a blank
	// line, with no role markers and nothing appended. A single message
	// renders as its content unchanged, so a completion prompt stays as is.
	TemplatePlain          ChatTemplate = "plain"
	TemplateChatML         ChatTemplate = "chatml"
	TemplateLlama2         ChatTemplate = "llama2"
	TemplateLlama2Sys      ChatTemplate = "llama2-sys"
	TemplateLlama2SysBOS   ChatTemplate = "llama2-sys-bos"
	TemplateLlama2SysStrip ChatTemplate = "llama2-sys-strip"
	TemplateMistralV1      ChatTemplate = "mistral-v1"
	TemplateMistralV3      ChatTemplate = "mistral-v3"
	TemplateMistralV3Tek   ChatTemplate = "mistral-v3-tekken"
	TemplateMistralV7      ChatTemplate = "mistral-v7"
	TemplatePhi3           ChatTemplate = "phi3"
	TemplatePhi4           ChatTemplate = "phi4"
	TemplateFalcon3        ChatTemplate = "falcon3"
	TemplateZephyr         ChatTemplate = "zephyr"
	TemplateMonarch        ChatTemplate = "monarch"
	TemplateGemma          ChatTemplate = "gemma"
	TemplateOpenChat       ChatTemplate = "openchat"
	TemplateVicuna         ChatTemplate = "vicuna"
	TemplateVicunaOrca     ChatTemplate = "vicuna-orca"
	TemplateDeepSeek       ChatTemplate = "deepseek"
	TemplateDeepSeek2      ChatTemplate = "deepseek2"
	TemplateDeepSeek3      ChatTemplate = "deepseek3"
	TemplateCommandR       ChatTemplate = "command-r"
	TemplateLlama3         ChatTemplate = "llama3"
	TemplateLlama4         ChatTemplate = "llama4"
	TemplateChatGLM4       ChatTemplate = "chatglm4"
	TemplateGLMEdge        ChatTemplate = "glmedge"
	TemplateExaone3        ChatTemplate = "exaone3"
	TemplateGranite        ChatTemplate = "granite"
)

// ChatTemplates lists the families Render supports, TemplatePlain first.
func ChatTemplates() []ChatTemplate {
	return []ChatTemplate{
		TemplatePlain, TemplateChatML, TemplateLlama2, TemplateLlama2Sys, TemplateLlama2SysBOS,
		TemplateLlama2SysStrip, TemplateMistralV1, TemplateMistralV3, TemplateMistralV3Tek,
		TemplateMistralV7, TemplatePhi3, TemplatePhi4, TemplateFalcon3, TemplateZephyr,
		TemplateMonarch, TemplateGemma, TemplateOpenChat, TemplateVicuna, TemplateVicunaOrca,
		TemplateDeepSeek, TemplateDeepSeek2, TemplateDeepSeek3, TemplateCommandR, TemplateLlama3,
		TemplateLlama4, TemplateChatGLM4, TemplateGLMEdge, TemplateExaone3, TemplateGranite,
	}
}

// DetectChatTemplate returns the family of a model's chat template, given
// the Jinja text of its tokenizer.chat_template (or a family name). It
// returns TemplatePlain for an empty or unrecognised template.
func DetectChatTemplate(jinja string) ChatTemplate {
	for _, t := range ChatTemplates() {
		if jinja == string(t) {
			return t
		}
	}
	has := func(s string) bool { return strings.Contains(jinja, s) }
	switch {
	case jinja == "":
		return TemplatePlain
	case has("<|im_start|>"):
		if has("<|im_sep|>") {
			return TemplatePhi4
		}
		if has("<end_of_utterance>") { // SmolVLM: not chatml, not rendered here
			return TemplatePlain
		}
		return TemplateChatML
	case strings.HasPrefix(jinja, "mistral") || has("[INST]"):
		switch {
		case has("[SYSTEM_PROMPT]"):
			return TemplateMistralV7
		case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
			if has(" [INST]") {
				return TemplateMistralV1
			}
			if has(`"[INST]"`) {
				return TemplateMistralV3Tek
			}
			return TemplateMistralV3
		case has("content.strip()"):
			return TemplateLlama2SysStrip
		case has("bos_token + '[INST]"):
			return TemplateLlama2SysBOS
		case has("<<SYS>>"):
			return TemplateLlama2Sys
		}
		return TemplateLlama2
	case has("<|assistant|>") && has("<|end|>"):
		return TemplatePhi3
	case has("[gMASK]<sop>"):
		return TemplateChatGLM4
	case has("<|assistant|>") && has("<|user|>"):
		if has("</s>") {
			return TemplateFalcon3
		}
		return TemplateGLMEdge
	case has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"):
		return TemplateGLMEdge
	case has("<|user|>") && has("<|endoftext|>"):
		return TemplateZephyr
	case has("bos_token + message['role']"):
		return TemplateMonarch
	case has("<start_of_turn>"):
		return TemplateGemma
	case has("GPT4 Correct "):
		return TemplateOpenChat
	case has("USER: ") && has("ASSISTANT: "):
		if has("SYSTEM: ") {
			return TemplateVicunaOrca
		}
		return TemplateVicuna
	case has("### Instruction:") && has("<|EOT|>"):
		return TemplateDeepSeek
	case has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"):
		return TemplateCommandR
	case has("<|start_header_id|>") && has("<|end_header_id|>"):
		return TemplateLlama3
	case has("'Assistant: ' + message['content'] + eos_token"):
		return TemplateDeepSeek2
	case has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>"):
		return TemplateDeepSeek3
	case has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]") && !has("[|tool|]"):
		return TemplateExaone3
	case has("<|start_of_role|>"):
		return TemplateGranite
	case has("<|header_start|>") && has("<|header_end|>"):
		return TemplateLlama4
	}
	return TemplatePlain
}

// Render turns messages into the prompt text, ending where the assistant's
// reply begins (for families that mark it). Roles are "system", "user",
// "assistant" and "tool"; an empty list, an empty or unknown role, or an
// unknown family is an ErrBadRequest. Tool messages and assistant tool
// calls render as text in every family (see flattenToolMessages): a run of
// tool messages as one user turn of <tool_response> blocks (Qwen's way),
// tool calls as {"tool_calls": [...]} after the assistant's content.
func (t ChatTemplate) Render(messages []Message) (string, error) {
	r, ok := renderers(t)
	if !ok {
		return "", BadRequestf("unknown chat template %q", string(t))
	}
	if usesTools(messages) {
		if err := validateToolMessages(messages); err != nil {
			return "", err
		}
		messages = flattenToolMessages(messages)
	}
	if len(messages) == 0 {
		return "", BadRequestf("no messages")
	}
	for i, m := range messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", BadRequestf("message %d: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
	}
	var b strings.Builder
	r(&b, messages)
	return b.String(), nil
}

// trim strips ASCII white space as llama.cpp's trim does.
func trim(s string) string { return strings.Trim(s, " \t\n\v\f\r") }

type renderer func(b *strings.Builder, ms []Message)

func renderers(t ChatTemplate) (renderer, bool) {
	switch t {
	case TemplatePlain:
		return renderPlain, true
	case TemplateChatML:
		return renderChatML, true
	case TemplateLlama2, TemplateLlama2Sys, TemplateLlama2SysBOS, TemplateLlama2SysStrip:
		return func(b *strings.Builder, ms []Message) { renderLlama2(b, ms, t) }, true
	case TemplateMistralV1, TemplateMistralV3, TemplateMistralV3Tek:
		return func(b *strings.Builder, ms []Message) { renderMistral(b, ms, t) }, true
	case TemplateMistralV7:
		return renderMistralV7, true
	case TemplatePhi3:
		return rolesWrapped("<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false), true
	case TemplatePhi4:
		return rolesWrapped("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", false), true
	case TemplateFalcon3:
		return rolesWrapped("<|", "|>\n", "\n", "<|assistant|>\n", false), true
	case TemplateZephyr:
		return rolesWrapped("<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false), true
	case TemplateLlama3:
		return rolesWrapped("<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
			"<|start_header_id|>assistant<|end_header_id|>\n\n", true), true
	case TemplateLlama4:
		return rolesWrapped("<|header_start|>", "<|header_end|>\n\n", "<|eot|>",
			"<|header_start|>assistant<|header_end|>\n\n", true), true
	case TemplateGranite:
		return rolesWrapped("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n",
			"<|start_of_role|>assistant<|end_of_role|>", false), true
	case TemplateGLMEdge:
		return rolesWrapped("<|", "|>\n", "", "<|assistant|>", false), true
	case TemplateChatGLM4:
		return func(b *strings.Builder, ms []Message) {
			b.WriteString("[gMASK]<sop>")
			rolesWrapped("<|", "|>\n", "", "<|assistant|>\n", false)(b, ms)
		}, true
	case TemplateMonarch:
		return renderMonarch, true
	case TemplateGemma:
		return renderGemma, true
	case TemplateOpenChat:
		return renderOpenChat, true
	case TemplateVicuna, TemplateVicunaOrca:
		return func(b *strings.Builder, ms []Message) { renderVicuna(b, ms, t == TemplateVicunaOrca) }, true
	case TemplateDeepSeek:
		return renderDeepSeek, true
	case TemplateDeepSeek2:
		return renderDeepSeek2, true
	case TemplateDeepSeek3:
		return renderDeepSeek3, true
	case TemplateCommandR:
		return renderCommandR, true
	case TemplateExaone3:
		return renderExaone3, true
	}
	return nil, false
}
