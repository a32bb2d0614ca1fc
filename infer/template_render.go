package infer

import "strings"

// The renderers below transcribe llama.cpp's llm_chat_apply_template with
// add_ass (append the assistant's header) set.

func renderPlain(b *strings.Builder, ms []Message) {
	for i, m := range ms {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(m.Content)
	}
}

func renderChatML(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
}

// rolesWrapped renders each message as pre+role+mid+content+post, then gen.
func rolesWrapped(pre, mid, post, gen string, trimContent bool) renderer {
	return func(b *strings.Builder, ms []Message) {
		for _, m := range ms {
			c := m.Content
			if trimContent {
				c = trim(c)
			}
			b.WriteString(pre + m.Role + mid + c + post)
		}
		b.WriteString(gen)
	}
}

func renderLlama2(b *strings.Builder, ms []Message, t ChatTemplate) {
	sys := t != TemplateLlama2
	bosInside := t == TemplateLlama2SysBOS
	strip := t == TemplateLlama2SysStrip
	inside := true
	b.WriteString("[INST] ")
	for _, m := range ms {
		c := m.Content
		if strip {
			c = trim(c)
		}
		if !inside {
			inside = true
			if bosInside {
				b.WriteString("<s>[INST] ")
			} else {
				b.WriteString("[INST] ")
			}
		}
		switch m.Role {
		case "system":
			if sys {
				b.WriteString("<<SYS>>\n" + c + "\n<</SYS>>\n\n")
			} else {
				b.WriteString(c + "\n")
			}
		case "user":
			b.WriteString(c + " [/INST]")
		default:
			b.WriteString(c + "</s>")
			inside = false
		}
	}
}

func renderMistral(b *strings.Builder, ms []Message, t ChatTemplate) {
	lead, trail := "", " "
	if t == TemplateMistralV1 {
		lead = " "
	}
	if t == TemplateMistralV3Tek {
		trail = ""
	}
	inside := false
	for _, m := range ms {
		if !inside {
			b.WriteString(lead + "[INST]" + trail)
			inside = true
		}
		switch m.Role {
		case "system":
			b.WriteString(m.Content + "\n\n")
		case "user":
			b.WriteString(m.Content + lead + "[/INST]")
		default:
			c := m.Content
			if t == TemplateMistralV3 {
				c = trim(c)
			}
			b.WriteString(trail + c + "</s>")
			inside = false
		}
	}
}

func renderMistralV7(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			b.WriteString("[SYSTEM_PROMPT] " + m.Content + "[/SYSTEM_PROMPT]")
		case "user":
			b.WriteString("[INST] " + m.Content + "[/INST]")
		default:
			b.WriteString(" " + m.Content + "</s>")
		}
	}
}

func renderMonarch(b *strings.Builder, ms []Message) {
	for i, m := range ms {
		if i > 0 {
			b.WriteString("<s>")
		}
		b.WriteString(m.Role + "\n" + m.Content + "</s>\n")
	}
	b.WriteString("<s>assistant\n")
}

func renderGemma(b *strings.Builder, ms []Message) {
	system := ""
	for _, m := range ms {
		if m.Role == "system" {
			system += trim(m.Content)
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system != "" && role != "model" {
			b.WriteString(system + "\n\n")
			system = ""
		}
		b.WriteString(trim(m.Content) + "<end_of_turn>\n")
	}
	b.WriteString("<start_of_turn>model\n")
}

func renderOpenChat(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		if m.Role == "system" {
			b.WriteString(m.Content + "<|end_of_turn|>")
			continue
		}
		role := strings.ToUpper(m.Role[:1]) + m.Role[1:]
		b.WriteString("GPT4 Correct " + role + ": " + m.Content + "<|end_of_turn|>")
	}
	b.WriteString("GPT4 Correct Assistant:")
}

func renderVicuna(b *strings.Builder, ms []Message, orca bool) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			if orca {
				b.WriteString("SYSTEM: " + m.Content + "\n")
			} else {
				b.WriteString(m.Content + "\n\n")
			}
		case "user":
			b.WriteString("USER: " + m.Content + "\n")
		case "assistant":
			b.WriteString("ASSISTANT: " + m.Content + "</s>\n")
		}
	}
	b.WriteString("ASSISTANT:")
}

func renderDeepSeek(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			b.WriteString(m.Content)
		case "user":
			b.WriteString("### Instruction:\n" + m.Content + "\n")
		case "assistant":
			b.WriteString("### Response:\n" + m.Content + "\n<|EOT|>\n")
		}
	}
	b.WriteString("### Response:\n")
}

func renderDeepSeek2(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			b.WriteString(m.Content + "\n\n")
		case "user":
			b.WriteString("User: " + m.Content + "\n\n")
		case "assistant":
			b.WriteString("Assistant: " + m.Content + "<｜end▁of▁sentence｜>")
		}
	}
	b.WriteString("Assistant:")
}

func renderDeepSeek3(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			b.WriteString(m.Content + "\n\n")
		case "user":
			b.WriteString("<｜User｜>" + m.Content)
		case "assistant":
			b.WriteString("<｜Assistant｜>" + m.Content + "<｜end▁of▁sentence｜>")
		}
	}
	b.WriteString("<｜Assistant｜>")
}

func renderCommandR(b *strings.Builder, ms []Message) {
	tokens := map[string]string{"system": "<|SYSTEM_TOKEN|>", "user": "<|USER_TOKEN|>", "assistant": "<|CHATBOT_TOKEN|>"}
	for _, m := range ms {
		if tok, ok := tokens[m.Role]; ok {
			b.WriteString("<|START_OF_TURN_TOKEN|>" + tok + trim(m.Content) + "<|END_OF_TURN_TOKEN|>")
		}
	}
	b.WriteString("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
}

func renderExaone3(b *strings.Builder, ms []Message) {
	for _, m := range ms {
		switch m.Role {
		case "system":
			b.WriteString("[|system|]" + trim(m.Content) + "[|endofturn|]\n")
		case "user":
			b.WriteString("[|user|]" + trim(m.Content) + "\n")
		case "assistant":
			b.WriteString("[|assistant|]" + trim(m.Content) + "[|endofturn|]\n")
		}
	}
	b.WriteString("[|assistant|]")
}
