package infer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// conversation is the chat llama.cpp's tests/test-chat-template.cpp renders.
var conversation = []Message{
	{Role: "system", Content: "You are a helpful assistant"},
	{Role: "user", Content: "Hello"},
	{Role: "assistant", Content: "Hi there"},
	{Role: "user", Content: "Who are you"},
	{Role: "assistant", Content: "   I am an assistant   "},
	{Role: "user", Content: "Another question"},
}

func TestRenderFamilies(t *testing.T) {
	tests := []struct {
		tmpl ChatTemplate
		want string
	}{
		{TemplatePlain, "You are a helpful assistant\n\nHello\n\nHi there\n\nWho are you\n\n   I am an assistant   \n\nAnother question"},
		{TemplateChatML, "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"},
		{TemplateLlama2, "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
		{TemplateLlama2Sys, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
		{TemplateLlama2SysBOS, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
		{TemplateLlama2SysStrip, "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
		{TemplateMistralV1, " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]"},
		{TemplateMistralV3, "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]"},
		{TemplateMistralV3Tek, "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
		{TemplateMistralV7, "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
		{TemplatePhi3, "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
		{TemplatePhi4, "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>"},
		{TemplateZephyr, "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n"},
		{TemplateMonarch, "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n"},
		{TemplateGemma, "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
		{TemplateOpenChat, "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question<|end_of_turn|>GPT4 Correct Assistant:"},
		{TemplateVicuna, "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
		{TemplateVicunaOrca, "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
		{TemplateDeepSeek, "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n"},
		{TemplateCommandR, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
		{TemplateLlama3, "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{TemplateDeepSeek3, "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜>"},
		{TemplateChatGLM4, "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n"},
		{TemplateGranite, "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"},
	}
	for _, tt := range tests {
		t.Run(string(tt.tmpl), func(t *testing.T) {
			got, err := tt.tmpl.Render(conversation)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("render:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRenderEveryFamily(t *testing.T) {
	for _, tmpl := range ChatTemplates() {
		got, err := tmpl.Render([]Message{{Role: "user", Content: "Why is the sky blue?"}})
		if err != nil {
			t.Errorf("%s: %v", tmpl, err)
			continue
		}
		if !strings.Contains(got, "Why is the sky blue?") {
			t.Errorf("%s: content lost: %q", tmpl, got)
		}
		if DetectChatTemplate(string(tmpl)) != tmpl {
			t.Errorf("a family name must detect as itself: %s", tmpl)
		}
	}
}

func TestRenderPlainSingleMessageUnchanged(t *testing.T) {
	got, err := TemplatePlain.Render([]Message{{Role: "user", Content: " Once upon a time"}})
	if err != nil || got != " Once upon a time" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestRenderErrors(t *testing.T) {
	for name, c := range map[string]struct {
		tmpl ChatTemplate
		msgs []Message
	}{
		"no messages":    {TemplateChatML, nil},
		"unknown role":   {TemplateChatML, []Message{{Role: "wizard", Content: "hi"}}},
		"empty role":     {TemplateLlama3, []Message{{Role: "", Content: "hi"}}},
		"unknown family": {ChatTemplate("jinja2000"), []Message{{Role: "user", Content: "hi"}}},
		"empty family":   {ChatTemplate(""), []Message{{Role: "user", Content: "hi"}}},
	} {
		if _, err := c.tmpl.Render(c.msgs); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

// TestDetectRealTemplates detects the Jinja chat templates of real models,
// read from Ollama's template index in the module cache (not copied here):
// each is named by Ollama's name for it, then a counter.
func TestDetectRealTemplates(t *testing.T) {
	want := map[string]ChatTemplate{
		"alfred-1":                 TemplatePlain,
		"alpaca-1":                 TemplateDeepSeek, // a DeepSeek Coder template in Ollama's index
		"chatml-1":                 TemplateChatML,
		"chatml-2":                 TemplateChatML,
		"chatml-3":                 TemplateChatML,
		"chatml-4":                 TemplateChatML,
		"chatml-5":                 TemplateChatML,
		"chatml-6":                 TemplateChatML,
		"chatml-7":                 TemplateChatML,
		"chatml-8":                 TemplateChatML,
		"chatml-9":                 TemplateChatML,
		"chatml-10":                TemplateChatML,
		"chatml-11":                TemplateChatML,
		"chatqa-1":                 TemplateDeepSeek2, // same markers as DeepSeek-V2
		"chatqa-2":                 TemplatePlain,
		"codellama-70b-instruct-1": TemplatePlain,
		"command-r-1":              TemplateCommandR,
		"falcon-instruct-1":        TemplatePlain,
		"falcon-instruct-2":        TemplatePlain,
		"gemma-instruct-1":         TemplateGemma,
		"gemma3-instruct-1":        TemplateGemma,
		"granite-instruct-1":       TemplatePlain,
		"llama2-chat-1":            TemplateLlama2SysBOS, // bos_token + '[INST]', no content.strip()
		"llama2-chat-2":            TemplateLlama2SysStrip,
		"llama3-instruct-1":        TemplateLlama3,
		"llama3-instruct-2":        TemplateLlama3,
		"magicoder-1":              TemplatePlain,
		"mistral-instruct-1":       TemplateLlama2,
		"mistral-instruct-2":       TemplateLlama2,
		"openchat-1":               TemplateOpenChat,
		"phi-3-1":                  TemplatePhi3,
		"phi-3-2":                  TemplatePhi3,
		"phi-3-3":                  TemplatePhi3,
		"solar-instruct-1":         TemplatePlain,
		"starcoder2-instruct-1":    TemplatePlain,
		"zephyr-1":                 TemplateGLMEdge, // eos_token, not <|endoftext|>: llama.cpp says glmedge too
		"zephyr-2":                 TemplateGLMEdge,
	}
	var index []struct{ Name, Template string }
	if err := json.Unmarshal([]byte(realTemplate(t, modOllama, "template/index.json")), &index); err != nil {
		t.Fatal(err)
	}
	if len(index) != len(want) {
		t.Fatalf("found %d templates, want %d", len(index), len(want))
	}
	seen := map[string]int{}
	for _, e := range index {
		seen[e.Name]++
		name := fmt.Sprintf("%s-%d", e.Name, seen[e.Name])
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectation", name)
			continue
		}
		if got := DetectChatTemplate(e.Template); got != w {
			t.Errorf("%s: detected %s, want %s", name, got, w)
		}
	}
}

func TestDetectMarkers(t *testing.T) {
	tests := []struct {
		jinja string
		want  ChatTemplate
	}{
		{"", TemplatePlain},
		{"{{ messages }}", TemplatePlain},
		{"{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", TemplateChatML},
		{"<|im_start|>{{ role }}<|im_sep|>", TemplatePhi4},
		{"<|im_start|>User:<end_of_utterance>", TemplatePlain},
		{"{{ '[SYSTEM_PROMPT]' }}[INST]", TemplateMistralV7},
		{"{{ ' [INST] ' + system_message }}", TemplateMistralV1},
		{`[AVAILABLE_TOOLS]{{ "[INST]" }}`, TemplateMistralV3Tek},
		{"[AVAILABLE_TOOLS][INST]", TemplateMistralV3},
		{"{{ bos_token + '[INST] ' }}<<SYS>>", TemplateLlama2SysBOS},
		{"[INST] <<SYS>>", TemplateLlama2Sys},
		{"[gMASK]<sop>{{ role }}", TemplateChatGLM4},
		{"<|user|>\n{{ c }}</s><|assistant|>", TemplateFalcon3},
		{"<|user|><|assistant|>", TemplateGLMEdge},
		{"{{ bos_token + message['role'] }}", TemplateMonarch},
		{"{{ 'USER: ' }}{{ 'ASSISTANT: ' }}{{ 'SYSTEM: ' }}", TemplateVicunaOrca},
		{"USER: x ASSISTANT: y", TemplateVicuna},
		{"### Instruction:\n<|EOT|>", TemplateDeepSeek},
		{"{{ 'Assistant: ' + message['content'] + eos_token }}", TemplateDeepSeek2},
		{"<｜User｜><｜Assistant｜><｜end▁of▁sentence｜>", TemplateDeepSeek3},
		{"[|system|][|assistant|][|endofturn|]", TemplateExaone3},
		{"<|start_of_role|>", TemplateGranite},
		{"<|header_start|>user<|header_end|>", TemplateLlama4},
		{"mistral", TemplateLlama2}, // llama.cpp: a template starting with "mistral" is a llama2 variant
	}
	for _, tt := range tests {
		if got := DetectChatTemplate(tt.jinja); got != tt.want {
			t.Errorf("DetectChatTemplate(%q) = %s, want %s", tt.jinja, got, tt.want)
		}
	}
}
