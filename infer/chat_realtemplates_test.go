package infer

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Real chat templates are not copied into this repository: the tests read
// them from the module cache, from modules go.mod requires (ollama's test
// data and template index, and the Jinja engine's test data). Outside CI a
// missing module skips; under CI=true it fails.

var moduleDirs sync.Map // module path -> dir ("" if unavailable)

func moduleDir(t *testing.T, module string) string {
	t.Helper()
	if d, ok := moduleDirs.Load(module); ok {
		return d.(string)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		dir = ""
	}
	moduleDirs.Store(module, dir)
	return dir
}

// realTemplate reads a file of a required module; it skips (fails under
// CI) when the file is not there.
func realTemplate(t *testing.T, module, rel string) string {
	t.Helper()
	dir := moduleDir(t, module)
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if dir == "" || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real template %s in %s: %v (run go mod download)", rel, module, err)
		}
		t.Skipf("real template %s in %s not available: %v", rel, module, err)
	}
	return string(b)
}

const (
	modJinja  = "github.com/ardanlabs/jinja"
	modOllama = "github.com/ollama/ollama"
)

// realTemplates are the tool-capable (and some tool-less) chat templates
// the tests render.
var realTemplates = []struct {
	name, module, path string
	family             ChatTemplate
	tools              ToolFormat // the format used (generic when the template is not)
}{
	{"qwen3", modJinja, "testdata/templates/Qwen3-8B-Q8_0.jinja", TemplateChatML, ToolFormatHermes},
	{"qwen3-vl", modJinja, "testdata/templates/Qwen3-VL-30B-A3B-Instruct-Q8_0.jinja", TemplateChatML, ToolFormatHermes},
	{"rnj-1", modJinja, "testdata/templates/rnj-1-instruct-Q6_K.jinja", TemplateLlama3, ToolFormatHermes},
	{"llama3.2", modJinja, "testdata/templates/Llama-3.2-1B-Instruct-GGUF.jinja", TemplateLlama3, ToolFormatLlama3},
	{"llama3.1", modOllama, "template/index.json#llama3-instruct-tools", TemplateLlama3, ToolFormatLlama3},
	{"ministral3", modJinja, "testdata/templates/Ministral-3-14B-Instruct-2512-Q4_0.jinja", TemplateMistralV7, ToolFormatMistralArgs},
	{"mistral-medium-3.5", modJinja, "testdata/templates/Mistral-Medium-3.5-128B-GGUF.jinja", TemplateMistralV7, ToolFormatMistralArgs},
	{"qwen3.5", modJinja, "testdata/templates/Qwen3.5-35B-A3B-Q8_0.jinja", TemplateChatML, ToolFormatQwenXML},
	{"qwen3.6", modJinja, "testdata/templates/Qwen3.6-35B-A3B-UD-Q4_K_M.jinja", TemplateChatML, ToolFormatQwenXML},
	{"nemotron3-super", modJinja, "testdata/templates/NVIDIA-Nemotron-3-Super.jinja", TemplateChatML, ToolFormatQwenXML},
	{"nemotron3-nano", modOllama, "model/renderers/testdata/nemotron3nano_chat_template.jinja2", TemplateChatML, ToolFormatQwenXML},
	{"glm-5.2", modJinja, "testdata/templates/GLM-5.2.jinja", TemplateChatGLM4, ToolFormatGLM},
	{"laguna", modJinja, "testdata/templates/laguna.jinja", TemplatePlain, ToolFormatGLM},
	// Tool formats this package does not parse, or no tools: generic.
	{"qwen2-audio", modJinja, "testdata/templates/Qwen2-Audio-7B.Q8_0.jinja", TemplateChatML, ToolFormatGeneric},
	{"gemma4", modOllama, "model/renderers/testdata/gemma4_e2b_chat_template.jinja2", TemplatePlain, ToolFormatGeneric},
	{"gpt-oss", modJinja, "testdata/templates/gpt-oss-20b-Q8_0.jinja", TemplatePlain, ToolFormatGeneric},
	{"kimi-k3", modJinja, "testdata/templates/Kimi-K3.jinja", TemplatePlain, ToolFormatGeneric},
	{"deepseek-v4", modJinja, "testdata/templates/DeepSeek-V4-Flash.jinja", TemplateDeepSeek3, ToolFormatGeneric},
}

// loadRealTemplate reads one of realTemplates; "index.json#llama3-instruct-tools"
// is the tool-capable llama3-instruct entry of ollama's template index.
func loadRealTemplate(t *testing.T, module, path string) string {
	t.Helper()
	file, entry, _ := strings.Cut(path, "#")
	src := realTemplate(t, module, file)
	if entry == "" {
		return src
	}
	for _, e := range ollamaIndex(t, src) {
		if e.Name == "llama3-instruct" && strings.Contains(e.Template, "tools") {
			return e.Template
		}
	}
	t.Fatalf("%s: no %s entry", path, entry)
	return ""
}

// fixedClock is the strftime_now clock of the tests.
func fixedClock() time.Time { return time.Date(2024, 7, 26, 15, 4, 5, 0, time.UTC) }

func realFormat(t *testing.T, name string) *ChatFormat {
	t.Helper()
	for _, rt := range realTemplates {
		if rt.name == name {
			return NewChatFormat(loadRealTemplate(t, rt.module, rt.path), ChatFormatOptions{
				BOS: "<s>", EOS: "</s>", Now: fixedClock,
			})
		}
	}
	t.Fatalf("no real template %q", name)
	return nil
}

type ollamaIndexEntry struct {
	Template string `json:"template"`
	Name     string `json:"name"`
}

func ollamaIndex(t *testing.T, src string) []ollamaIndexEntry {
	t.Helper()
	var entries []ollamaIndexEntry
	if err := json.Unmarshal([]byte(src), &entries); err != nil {
		t.Fatalf("ollama's template index: %v", err)
	}
	return entries
}
