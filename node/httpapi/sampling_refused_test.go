package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestUnsupportedSamplersRefused: a sampler setting the engine does not
// run is a 400 naming it in both dialects, not silently dropped; the same
// setting at its "off" value is served.
func TestUnsupportedSamplersRefused(t *testing.T) {
	_, _, url := newTestServer(t)
	for _, c := range []struct {
		field, value string
		refused      bool
	}{
		{"mirostat", "2", true},
		{"mirostat", "0", false},
		{"typical_p", "0.5", true},
		{"typical_p", "1", false},
		{"tfs_z", "0.9", true},
		{"dry_multiplier", "0.8", true},
		{"xtc_probability", "0.1", true},
		{"grammar", `"root ::= \"a\""`, true},
		{"mirostat_tau", "5", false},
	} {
		openai := `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"` + c.field + `":` + c.value + `}`
		status, _, body := post(t, url, "/v1/chat/completions", openai)
		var oe openAIErrorEnvelope
		json.Unmarshal(body, &oe)
		if c.refused != (status == 400) || (c.refused && (oe.Error.Param == nil || *oe.Error.Param != c.field)) {
			t.Errorf("openai %s=%s: %d %s", c.field, c.value, status, body)
		}
		ollama := `{"model":"stories260K","prompt":"hi","stream":false,"options":{"num_predict":2,"` + c.field + `":` + c.value + `}}`
		if c.field == "grammar" {
			continue // not an Ollama option
		}
		status, _, body = post(t, url, "/api/generate", ollama)
		if c.refused != (status == 400) || (c.refused && !strings.Contains(string(body), c.field)) {
			t.Errorf("ollama %s=%s: %d %s", c.field, c.value, status, body)
		}
	}
}
