package infer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestToolConstraint(t *testing.T) {
	tools := []Tool{weatherTool, timeTool}
	required := ToolChoice{Mode: ToolChoiceRequired}
	named := ToolChoice{Function: "get_time"}
	weatherCall := `{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":` + string(weatherTool.Parameters) + `},"required":["name","arguments"]}`
	timeCall := `{"type":"object","properties":{"name":{"const":"get_time"},"arguments":` + string(timeTool.Parameters) + `},"required":["name","arguments"]}`
	timeCallLlama := strings.ReplaceAll(timeCall, "arguments", "parameters")
	for _, c := range []struct {
		name   string
		format ToolFormat
		choice ToolChoice
		want   *Constraint
	}{
		{"auto hermes", ToolFormatHermes, ToolChoice{}, nil},
		{"auto llama3", ToolFormatLlama3, ToolChoice{Mode: ToolChoiceAuto}, nil},
		{"none", ToolFormatGeneric, ToolChoice{Mode: ToolChoiceNone}, nil},
		{"hermes required", ToolFormatHermes, required, &Constraint{JSONSchema: `{"anyOf":[` + weatherCall + `,` + timeCall + `]}`, Prefix: "<tool_call>\n", Suffix: "\n</tool_call>"}},
		{"hermes named", ToolFormatHermes, named, &Constraint{JSONSchema: timeCall, Prefix: "<tool_call>\n", Suffix: "\n</tool_call>"}},
		{"llama3 named", ToolFormatLlama3, named, &Constraint{JSONSchema: timeCallLlama}},
		{"mistral named", ToolFormatMistral, named, &Constraint{JSONSchema: `{"type":"array","items":` + timeCall + `,"minItems":1}`, Prefix: "[TOOL_CALLS]"}},
		{"mistral-args named", ToolFormatMistralArgs, named, &Constraint{JSONSchema: string(timeTool.Parameters), Prefix: "[TOOL_CALLS]get_time[ARGS]"}},
		{"generic required", ToolFormatGeneric, required, &Constraint{JSONSchema: `{"type":"object","properties":{"tool_calls":{"type":"array","items":{"anyOf":[` + weatherCall + `,` + timeCall + `]},"minItems":1}},"required":["tool_calls"]}`}},
		{"generic single", ToolFormatGeneric, ToolChoice{Mode: ToolChoiceRequired, Single: true}, &Constraint{JSONSchema: `{"type":"object","properties":{"tool_calls":{"type":"array","items":{"anyOf":[` + weatherCall + `,` + timeCall + `]},"minItems":1,"maxItems":1}},"required":["tool_calls"]}`}},
		{"mistral single", ToolFormatMistral, ToolChoice{Function: "get_time", Single: true}, &Constraint{JSONSchema: `{"type":"array","items":` + timeCall + `,"minItems":1,"maxItems":1}`, Prefix: "[TOOL_CALLS]"}},
		{"generic named", ToolFormatGeneric, named, &Constraint{JSONSchema: `{"type":"object","properties":{"tool_calls":{"type":"array","items":` + timeCall + `,"minItems":1}},"required":["tool_calls"]}`}},
		{"generic auto", ToolFormatGeneric, ToolChoice{}, &Constraint{JSONSchema: `{"anyOf":[{"type":"object","properties":{"tool_calls":{"type":"array","items":{"anyOf":[` + weatherCall + `,` + timeCall + `]},"minItems":1}},"required":["tool_calls"]},{"type":"object","properties":{"response":{"type":"string"}},"required":["response"]}]}`}},
	} {
		got, err := c.format.Constraint(tools, c.choice)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if got != nil && !json.Valid([]byte(got.JSONSchema)) {
			t.Errorf("%s: invalid schema", c.name)
		}
	}
}

func TestToolConstraintErrors(t *testing.T) {
	tools := []Tool{weatherTool, timeTool}
	for name, c := range map[string]struct {
		format ToolFormat
		tools  []Tool
		choice ToolChoice
	}{
		"unknown function":       {ToolFormatHermes, tools, ToolChoice{Function: "rm"}},
		"required without tools": {ToolFormatHermes, nil, ToolChoice{Mode: ToolChoiceRequired}},
		"bad mode":               {ToolFormatHermes, tools, ToolChoice{Mode: "sometimes"}},
		"xml required":           {ToolFormatQwenXML, tools, ToolChoice{Mode: ToolChoiceRequired}},
		"glm named":              {ToolFormatGLM, tools, ToolChoice{Function: "get_time"}},
		"mistral-args several":   {ToolFormatMistralArgs, tools, ToolChoice{Mode: ToolChoiceRequired}},
		"unknown format":         {ToolFormat("future"), tools, ToolChoice{Mode: ToolChoiceRequired}},
		"bad tools":              {ToolFormatHermes, []Tool{{Name: "a b"}}, ToolChoice{Mode: ToolChoiceRequired}},
		"schema too big": {ToolFormatGeneric, func() []Tool {
			var ts []Tool
			for i := range 8 {
				ts = append(ts, Tool{Name: "t" + string(rune('a'+i)), Parameters: []byte(`{"description":"` + strings.Repeat("x", MaxSchemaBytes/8) + `"}`)})
			}
			return ts
		}(), ToolChoice{Mode: ToolChoiceRequired}},
	} {
		if _, err := c.format.Constraint(c.tools, c.choice); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
	// Auto needs nothing for native formats, even for a format without
	// constraints; a single tool makes "required" work for [ARGS].
	if c, err := ToolFormatQwenXML.Constraint(tools, ToolChoice{}); c != nil || err != nil {
		t.Errorf("xml auto: %v, %v", c, err)
	}
	if c, err := ToolFormatMistralArgs.Constraint(tools[:1], ToolChoice{Mode: ToolChoiceRequired}); err != nil || c.Prefix != "[TOOL_CALLS]get_weather[ARGS]" {
		t.Errorf("mistral-args one tool: %+v, %v", c, err)
	}
}

// TestToolConstraintDefs: a tool schema's $defs (and definitions) move to
// the root of the combined schema, and its references follow.
func TestToolConstraintDefs(t *testing.T) {
	pydantic := Tool{Name: "add_item", Parameters: []byte(`{"$defs":{"Item":{"type":"object","properties":{"tags":{"type":"array","items":{"$ref":"#/$defs/Tag"}}}},"Tag":{"type":"string"}},"type":"object","properties":{"item":{"$ref":"#/$defs/Item"},"same":{"$ref":"#/properties/item"}}}`)}
	legacy := Tool{Name: "old", Parameters: []byte(`{"definitions":{"N":{"type":"integer"}},"type":"object","properties":{"n":{"$ref":"#/definitions/N"}}}`)}
	c, err := ToolFormatGeneric.Constraint([]Tool{pydantic, legacy}, ToolChoice{Mode: ToolChoiceRequired})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(c.JSONSchema), &schema); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t0_Item", "t0_Tag", "t0", "t1_N"} {
		if _, ok := schema.Defs[k]; !ok {
			t.Errorf("$defs lacks %s: %s", k, c.JSONSchema)
		}
	}
	for _, ref := range []string{`"#/$defs/t0_Item"`, `"#/$defs/t0_Tag"`, `"#/$defs/t0/properties/item"`, `"#/$defs/t1_N"`} {
		if !strings.Contains(c.JSONSchema, ref) {
			t.Errorf("no reference %s in %s", ref, c.JSONSchema)
		}
	}
	if strings.Contains(c.JSONSchema, `"#/definitions/`) || strings.Contains(c.JSONSchema, `"#/$defs/Item"`) || strings.Count(c.JSONSchema, `"$defs"`) != 1 {
		t.Errorf("references left behind: %s", c.JSONSchema)
	}
	// The tool's own value is not modified.
	if !strings.Contains(string(pydantic.Parameters), `"#/$defs/Item"`) {
		t.Error("the tool's parameters changed")
	}
}
