package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime/debug"
	"strings"

	"github.com/meshllm/meshllm/infer"
)

// maxSchemaNameBytes bounds response_format.json_schema.name (OpenAI's
// limit).
const maxSchemaNameBytes = 64

// jsonObjectSchema is the schema of json_object mode: any JSON object.
const jsonObjectSchema = `{"type":"object"}`

// responseConstraint turns a chat request's response_format into the
// grammar constraint the engine enforces: none for "text", any JSON object
// for "json_object", the given schema for "json_schema" (strict or not:
// the grammar always enforces it).
func responseConstraint(rf *responseFormat) (*infer.Constraint, *apiError) {
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		return &infer.Constraint{JSONSchema: jsonObjectSchema}, nil
	case "json_schema":
	default:
		return nil, badRequest("response_format", "response_format.type %q is not supported: use text, json_object or json_schema", rf.Type)
	}
	js := rf.JSONSchema
	if js == nil {
		return nil, badRequest("response_format", "response_format.json_schema is required when response_format.type is json_schema")
	}
	if len(js.Name) > maxSchemaNameBytes {
		return nil, badRequest("response_format", "response_format.json_schema.name has %d bytes, at most %d", len(js.Name), maxSchemaNameBytes)
	}
	c, e := schemaConstraint(js.Schema, "response_format", "response_format.json_schema.schema")
	if e != nil {
		return nil, e
	}
	return c, nil
}

// schemaConstraint checks a JSON schema a request sent under field (the
// path named in messages; param is the OpenAI param) and returns it,
// compacted, as a constraint.
func schemaConstraint(raw json.RawMessage, param, field string) (*infer.Constraint, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest(param, "%s is required", field)
	}
	if len(raw) > infer.MaxSchemaBytes {
		return nil, badRequest(param, "%s has %d bytes, at most %d", field, len(raw), infer.MaxSchemaBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, badRequest(param, "%s is not valid JSON: %v", field, err)
	}
	c := &infer.Constraint{JSONSchema: buf.String()}
	if err := checkConstraint(c); err != nil {
		return nil, badRequest(param, "%s: %s", field, strings.TrimPrefix(err.Error(), infer.ErrBadRequest.Error()+": "))
	}
	return c, nil
}

// checkConstraint runs infer's checks of a constraint (size, JSON, an
// object, nesting) on it alone, so that a bad schema is reported naming
// its field before anything is rendered.
func checkConstraint(c *infer.Constraint) error {
	return infer.Validate(infer.Request{Prompt: []int32{0}, Sampling: infer.Sampling{Constraint: c}}, infer.ModelInfo{ContextLength: 2})
}

// check refuses the chat fields this server does not honour.
func (r *chatRefused) check() *apiError {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		why  string
	}{
		{"audio", r.Audio, "audio output is not supported: this model writes text only"},
		{"function_call", r.FunctionCall, "function_call (deprecated by OpenAI) is not supported: use tool_choice"},
		{"functions", r.Functions, "functions (deprecated by OpenAI) is not supported: use tools"},
		{"logit_bias", r.LogitBias, ""},
		{"prediction", r.Prediction, "prediction (predicted outputs) is not supported"},
		{"reasoning_effort", r.ReasoningEffort, "reasoning_effort is not supported: this server has no reasoning controls"},
		{"verbosity", r.Verbosity, "verbosity is not supported"},
		{"web_search_options", r.WebSearch, "web_search_options is not supported: this server does not search the web"},
	} {
		if !rawGiven(f.raw) {
			continue
		}
		if f.name == "logit_bias" {
			return refusedLogitBias()
		}
		return badRequest(f.name, "%s", f.why)
	}
	if rawGiven(r.Modalities) {
		var m []string
		if json.Unmarshal(r.Modalities, &m) != nil || len(m) != 1 || m[0] != "text" {
			return badRequest("modalities", `modalities must be ["text"]: this model writes text only`)
		}
	}
	if rawGiven(r.Store) && !bytes.Equal(bytes.TrimSpace(r.Store), []byte("false")) {
		return badRequest("store", "store=true is not supported: this server keeps no completions")
	}
	return nil
}

func refusedLogitBias() *apiError {
	return badRequest("logit_bias", "logit_bias is not supported")
}

// systemFingerprint identifies the model and the build serving it
// ("fp_" and 10 hex digits): it changes when either does, as OpenAI's
// changes with its backend configuration.
func (s *Server) systemFingerprint() string {
	info := s.gen.Info()
	h := sha256.New()
	for _, part := range []string{info.ID, info.Name, s.cfg.Version, buildVersion()} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "fp_" + hex.EncodeToString(h.Sum(nil))[:10]
}

// buildVersion is the binary's module version and VCS revision, as the Go
// toolchain recorded them ("" when it recorded none).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" || kv.Key == "vcs.modified" {
			v += " " + kv.Value
		}
	}
	return v
}
