package infer

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateExtensions(t *testing.T) {
	info := ModelInfo{ContextLength: 256, VocabSize: 512}
	ok := Request{Prompt: []int32{1, 2}, Sampling: Sampling{
		PresencePenalty: -2, FrequencyPenalty: 2, RepeatLastN: -1, Logprobs: true, TopLogprobs: MaxTopLogprobs,
		Constraint: &Constraint{JSONSchema: `{"type":"object","properties":{"a":{"type":"array","items":{}}}}`,
			Prefix: "```json\n", Suffix: "\n```"},
	}}
	if err := Validate(ok, info); err != nil {
		t.Fatalf("valid request rejected: %v", err)
	}
	deep := strings.Repeat(`{"items":`, MaxSchemaDepth) + `{}` + strings.Repeat(`}`, MaxSchemaDepth)
	for name, mut := range map[string]func(s *Sampling){
		"presence high":     func(s *Sampling) { s.PresencePenalty = 2.01 },
		"frequency low":     func(s *Sampling) { s.FrequencyPenalty = -3 },
		"frequency NaN":     func(s *Sampling) { s.FrequencyPenalty = float32(math.NaN()) },
		"repeat_last_n -2":  func(s *Sampling) { s.RepeatLastN = -2 },
		"top_logprobs 21":   func(s *Sampling) { s.TopLogprobs = MaxTopLogprobs + 1 },
		"top_logprobs -1":   func(s *Sampling) { s.TopLogprobs = -1 },
		"top without lp":    func(s *Sampling) { s.Logprobs = false },
		"empty schema":      func(s *Sampling) { s.Constraint = &Constraint{} },
		"schema not JSON":   func(s *Sampling) { s.Constraint = &Constraint{JSONSchema: `{"type":`} },
		"schema not object": func(s *Sampling) { s.Constraint = &Constraint{JSONSchema: `["type"]`} },
		"schema trailing":   func(s *Sampling) { s.Constraint = &Constraint{JSONSchema: `{} {}`} },
		"schema too deep":   func(s *Sampling) { s.Constraint = &Constraint{JSONSchema: deep} },
		"schema too large": func(s *Sampling) {
			s.Constraint = &Constraint{JSONSchema: `{"a":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`}
		},
		"prefix too long":  func(s *Sampling) { s.Constraint.Prefix = strings.Repeat("p", MaxAffixBytes+1) },
		"suffix bad UTF-8": func(s *Sampling) { s.Constraint.Suffix = "\xff" },
		"suffix with NUL":  func(s *Sampling) { s.Constraint.Suffix = "a\x00b" },
		"prefix 258 bytes": func(s *Sampling) { s.Constraint.Prefix = strings.Repeat("é", MaxAffixBytes/2+1) },
	} {
		r := ok
		c := *ok.Sampling.Constraint
		r.Sampling.Constraint = &c
		mut(&r.Sampling)
		err := Validate(r, info)
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	// Just inside the depth bound is fine.
	inside := strings.Repeat(`{"items":`, MaxSchemaDepth-1) + `{}` + strings.Repeat(`}`, MaxSchemaDepth-1)
	r := ok
	r.Sampling.Constraint = &Constraint{JSONSchema: inside}
	if err := Validate(r, info); err != nil {
		t.Fatalf("schema %d deep rejected: %v", MaxSchemaDepth, err)
	}
}
