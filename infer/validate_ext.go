package infer

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxSchemaDepth bounds how deeply Constraint.JSONSchema nests (objects and
// arrays, counted together). The schema converter and the grammar parser
// recurse over it on a C stack, so depth is bounded before they see it.
const MaxSchemaDepth = 64

// MaxPenalty bounds PresencePenalty and FrequencyPenalty (OpenAI's range
// is [-MaxPenalty, MaxPenalty]).
const MaxPenalty = 2

// validateExtensions checks the sampling fields added for structured
// outputs, OpenAI's penalties and logprobs.
func validateExtensions(s Sampling) error {
	switch {
	case !(s.PresencePenalty >= -MaxPenalty && s.PresencePenalty <= MaxPenalty):
		return BadRequestf("presence_penalty %g out of range [-2, 2]", s.PresencePenalty)
	case !(s.FrequencyPenalty >= -MaxPenalty && s.FrequencyPenalty <= MaxPenalty):
		return BadRequestf("frequency_penalty %g out of range [-2, 2]", s.FrequencyPenalty)
	case s.RepeatLastN < -1:
		return BadRequestf("repeat_last_n must be >= -1 (-1: the whole context), got %d", s.RepeatLastN)
	case s.TopLogprobs < 0 || s.TopLogprobs > MaxTopLogprobs:
		return BadRequestf("top_logprobs %d out of range [0, %d]", s.TopLogprobs, MaxTopLogprobs)
	case s.TopLogprobs > 0 && !s.Logprobs:
		return BadRequestf("top_logprobs needs logprobs")
	}
	if s.Constraint != nil {
		return s.Constraint.check()
	}
	return nil
}

// check validates a constraint's sizes and syntax (the serving engine
// checks that its schema converts to a grammar).
func (c *Constraint) check() error {
	if len(c.JSONSchema) > MaxSchemaBytes {
		return BadRequestf("json schema of %d bytes, limit %d", len(c.JSONSchema), MaxSchemaBytes)
	}
	if strings.TrimSpace(c.JSONSchema) == "" {
		return BadRequestf("constraint without a json schema (use {\"type\":\"object\"} for any JSON object)")
	}
	if err := checkSchemaJSON(c.JSONSchema); err != nil {
		return err
	}
	for _, a := range []struct{ name, v string }{{"prefix", c.Prefix}, {"suffix", c.Suffix}} {
		switch {
		case len(a.v) > MaxAffixBytes:
			return BadRequestf("constraint %s of %d bytes, limit %d", a.name, len(a.v), MaxAffixBytes)
		case !utf8.ValidString(a.v):
			return BadRequestf("constraint %s is not valid UTF-8", a.name)
		case strings.IndexByte(a.v, 0) >= 0:
			return BadRequestf("constraint %s contains a NUL byte", a.name)
		}
	}
	return nil
}

// checkSchemaJSON checks that schema is one JSON object nested at most
// MaxSchemaDepth deep.
func checkSchemaJSON(schema string) error {
	if !json.Valid([]byte(schema)) {
		var v any
		err := json.Unmarshal([]byte(schema), &v)
		return BadRequestf("json schema is not valid JSON: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(schema))
	dec.UseNumber()
	depth := 0
	for first := true; ; first = false {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return BadRequestf("json schema is not valid JSON: %v", err)
		}
		switch {
		case first && tok != json.Delim('{'):
			return BadRequestf("json schema must be a JSON object")
		case !first && depth == 0:
			return BadRequestf("json schema has data after its object")
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > MaxSchemaDepth {
				return BadRequestf("json schema nests deeper than %d levels", MaxSchemaDepth)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
