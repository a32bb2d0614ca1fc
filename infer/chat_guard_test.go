package infer

import (
	"errors"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
)

// toolish makes a template look tool-capable (Hermes markers) around body,
// so NewChatFormat compiles and probes it.
func toolish(body string) string {
	return `{%- for m in messages %}<|im_start|>{{ m.role }}{{ m.content }}{% if m.tool_calls %}<tool_call>{{ m.tool_calls[0].function | tojson }}</tool_call>{% endif %}{%- endfor %}` +
		`{%- for t in tools %}{{ t.function.name }}{% endfor %}` + body
}

// TestGuardRefusesHostileTemplates: constructs that one expression can
// blow up are refused when the model loads; the model then gets the
// generic format.
func TestGuardRefusesHostileTemplates(t *testing.T) {
	for name, body := range map[string]string{
		"repetition":     `{{ 'x' * 1000000000000 }}`,
		"negative rep":   `{{ 'x' * -1 }}`,
		"recursive loop": `{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}`,
		"replace by var": `{% set s = 'ab' %}{{ s | replace('', s) }}`,
		"indent by var":  `{% set n = 100000000 %}{{ tools | tojson(indent=n) }}`,
		"wide indent":    `{{ 'a\nb' | indent(1000000) }}`,
		"reserved name":  `{% set _meshllm_enter = none %}`,
		"unclosed tag":   `{{ messages `,
		"unclosed macro": `{% macro f() %}x`,
		"deep blocks":    strings.Repeat("{% if true %}", maxBlockDepth+1) + strings.Repeat("{% endif %}", maxBlockDepth+1),
		"deep brackets":  "{{ " + strings.Repeat("(", maxBracketDepth+1) + "1" + strings.Repeat(")", maxBracketDepth+1) + " }}",
		"long tag":       "{{ 'a'" + strings.Repeat(" ~ 'a'", maxTagTokens) + " }}",
	} {
		t.Run(name, func(t *testing.T) {
			f := NewChatFormat(toolish(body), ChatFormatOptions{})
			if f.UsesJinja() || f.ToolFormat() != ToolFormatGeneric || f.JinjaError() == nil {
				t.Fatalf("accepted: tools %s, err %v", f.ToolFormat(), f.JinjaError())
			}
		})
	}
	if f := NewChatFormat(toolish(`{{ 'a' ~ '*' ~ "**" }}{{ 2 ** 3 }}{{ x | replace('a', "b") }}{{ tools | tojson(indent=4) }}`), ChatFormatOptions{}); !f.UsesJinja() {
		t.Fatalf("refused a harmless template: %v", f.JinjaError())
	}
}

// TestGuardBoundsRenders: what the vet lets through is bounded while
// rendering: recursion depth, loops, and the bytes built.
func TestGuardBoundsRenders(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}}
	for name, c := range map[string]struct {
		body string
		want string // in the error
	}{
		"endless recursion": {`{% macro f(n) %}{{ f(n) }}{% endmacro %}{% if messages|length == 1 %}{{ f(1) }}{% endif %}`, "deeper than"},
		"mutual recursion":  {`{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{% if messages|length == 1 %}{{ a() }}{% endif %}`, "deeper than"},
		"huge range":        {`{% if messages|length == 1 %}{% for i in range(1000000000) %}x{% endfor %}{% endif %}`, "range"},
		"nested loops":      {`{% if messages|length == 1 %}{% for i in range(90000) %}{% for j in range(90000) %}{% endfor %}{% endfor %}{% endif %}`, "budget"},
		"doubling":          {`{% set ns = namespace(s='xxxxxxxx') %}{% if messages|length == 1 %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% endif %}`, "budget"},
		"doubling by macro": {`{% macro d(s) %}{{ s }}{{ s }}{% endmacro %}{% set ns = namespace(s='xxxxxxxx') %}{% if messages|length == 1 %}{% for i in range(100) %}{% set ns.s = d(ns.s) %}{% endfor %}{% endif %}`, "budget"},
		"big output":        {`{% if messages|length == 1 %}{% for i in range(99999) %}{% for j in range(99999) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}{% endfor %}{% endif %}`, "budget"},
	} {
		t.Run(name, func(t *testing.T) {
			f := NewChatFormat(toolish(c.body), ChatFormatOptions{})
			if !f.UsesJinja() {
				t.Fatalf("the probe should pass (it has 4 messages): %v", f.JinjaError())
			}
			_, err := f.Render(msgs, []Tool{weatherTool})
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an ErrBadRequest about %q", err, c.want)
			}
		})
	}
}

// TestGuardProbeRefusesTemplatesThatDropTools: a template that mentions
// tools but does not render them (or fails on a tool conversation) is
// not used for tools.
func TestGuardProbeRefusesTemplatesThatDropTools(t *testing.T) {
	for name, src := range map[string]string{
		"ignores tools":   `{# tools #}<tool_call>{% for m in messages %}{{ m.content }}{% endfor %}`,
		"raises":          `<tool_call>{% if tools %}{{ raise_exception("no tools here") }}{% endif %}`,
		"not compilable":  `<tool_call>{% for tools in %}`,
		"drops tool msgs": `<tool_call>{% for t in tools %}{{ t.function.name }}{% endfor %}{% for m in messages if m.role != 'tool' %}{{ m.content }}{% endfor %}`,
	} {
		f := NewChatFormat(src, ChatFormatOptions{})
		if f.UsesJinja() || f.JinjaError() == nil || f.ToolFormat() != ToolFormatGeneric {
			t.Errorf("%s: used for tools (%v)", name, f.JinjaError())
		}
	}
}

// TestSafeRenderRecovers: a panic in the engine (a negative indent, which
// the vet refuses; rendered here unguarded) is an ErrBadRequest, not a
// crash.
func TestSafeRenderRecovers(t *testing.T) {
	tmpl, err := jinja.Compile(`{{ 'a' | indent(-3) }}`)
	if err != nil {
		t.Fatal(err)
	}
	f := NewChatFormat("", ChatFormatOptions{})
	_, err = f.renderJinja(tmpl, ToolFormatHermes, []Message{{Role: "user", Content: "hi"}}, nil)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("err = %v", err)
	}
}

func TestScanTemplateMatchesEngine(t *testing.T) {
	src := `a{{ "}}" }}b{%- if x -%}c{% endif %}{# {{ #}d{{ 'it''s' }}`
	segs, err := scanTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	var kinds, bodies []string
	for _, s := range segs {
		kinds = append(kinds, string(s.kind))
		bodies = append(bodies, s.body)
	}
	if strings.Join(kinds, "") != "t{t%t%#t{" {
		t.Fatalf("kinds %q", kinds)
	}
	if bodies[1] != ` "}}" ` || !segs[3].trimL || !segs[3].trimR || bodies[6] != " {{ " {
		t.Fatalf("bodies %q", bodies)
	}
	if assignIndex(` set ns.a = b == c `) != len(` set ns.a `) || assignIndex(` set x `) != -1 || assignIndex(` set d = f(a=1) `) != len(` set d `) {
		t.Fatal("assignIndex")
	}
}

func TestStrftime(t *testing.T) {
	got := strftime(fixedClock(), "%d %b %Y|%B %e %j|%H:%M:%S %I%p|%a %A %y %m|%F %T|%% %Q")
	want := "26 Jul 2024|July 26 208|15:04:05 03PM|Fri Friday 24 07|2024-07-26 15:04:05|% %Q"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzChatTemplate: any template text loads (used for tools or not) and
// renders or fails with an error, within the guard's bounds.
func FuzzChatTemplate(f *testing.F) {
	f.Add(toolish(`{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`))
	f.Add(toolish(`{% for i in range(3) %}{% set ns = namespace(a=i) %}{{ ns.a ~ loop.index }}{% endfor %}`))
	f.Add(`{%- if tools %}<tool_call>{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.role }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}{{ m.content }}{% endfor %}`)
	f.Add(`[TOOL_CALLS]{{ tools }}{% for m in messages %}{% if m.role == 'tool' %}{{ m.tool_call_id }}{% else %}{{ m | tojson(indent=2) }}{% endif %}{% endfor %}`)
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		cf := NewChatFormat(src, ChatFormatOptions{Now: fixedClock})
		if cf.UsesJinja() == (cf.JinjaError() != nil) {
			t.Fatalf("UsesJinja %v but JinjaError %v", cf.UsesJinja(), cf.JinjaError())
		}
		out, err := cf.Render(parallelChat, []Tool{weatherTool, timeTool})
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatalf("render error %v is not an ErrBadRequest", err)
		}
		if len(out) > MaxPromptBytes {
			t.Fatalf("prompt of %d bytes", len(out))
		}
	})
}
