package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// unsupportedSamplers are llama.cpp's and Ollama's sampler settings this
// engine does not run, each with the value that means "off". A request
// that sets one to anything else is refused naming it, rather than served
// with the setting silently dropped; clients that send every option at its
// default (some do) are served.
var unsupportedSamplers = []struct {
	name string
	off  []float64
}{
	{"mirostat", []float64{0}},
	{"mirostat_tau", nil}, // only meaningful with mirostat: accepted, any value
	{"mirostat_eta", nil},
	{"typical_p", []float64{0, 1}},
	{"tfs_z", []float64{0, 1}},
	{"dynatemp_range", []float64{0}},
	{"xtc_probability", []float64{0}},
	{"dry_multiplier", []float64{0}},
}

// refuseSamplers checks the fields of a request body (OpenAI) or of an
// options object (Ollama) against unsupportedSamplers.
func refuseSamplers(fields map[string]json.RawMessage) *apiError {
	for _, u := range unsupportedSamplers {
		raw, ok := fields[u.name]
		if !ok || u.off == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return badRequest(u.name, "%s must be a number", u.name)
		}
		off := false
		for _, o := range u.off {
			off = off || v == o
		}
		if !off {
			return badRequest(u.name, "%s", fmt.Sprintf("%s sampling is not supported by this engine (got %g): leave it unset", u.name, v))
		}
	}
	for _, name := range []string{"grammar", "json_schema"} {
		if raw, ok := fields[name]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) && !bytes.Equal(bytes.TrimSpace(raw), []byte(`""`)) {
			return badRequest(name, "%s (llama.cpp's field) is not supported: use response_format (OpenAI) or format (Ollama)", name)
		}
	}
	return nil
}
