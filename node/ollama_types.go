package node

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// generateRequest is the body of POST /api/generate. Fields not listed
// (keep_alive, context, think, ...) are ignored.
type generateRequest struct {
	Model    string            `json:"model"`
	Prompt   string            `json:"prompt"`
	System   string            `json:"system"`
	Suffix   string            `json:"suffix"`
	Template string            `json:"template"`
	Raw      bool              `json:"raw"`
	Stream   *bool             `json:"stream"`
	Format   json.RawMessage   `json:"format"`
	Images   []json.RawMessage `json:"images"`
	Options  ollamaOptions     `json:"options"`
}

// ollamaChatRequest is the body of POST /api/chat.
type ollamaChatRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	Stream   *bool           `json:"stream"`
	Format   json.RawMessage `json:"format"`
	Tools    json.RawMessage `json:"tools"`
	Options  ollamaOptions   `json:"options"`
}

type ollamaMessage struct {
	Role    string            `json:"role"`
	Content string            `json:"content"`
	Images  []json.RawMessage `json:"images,omitempty"`
}

// ollamaOptions are the options Ollama's runner accepts that change
// sampling; runner options (num_ctx, num_gpu, ...) are accepted and ignored.
// A known option of the wrong type is refused, as Ollama does.
type ollamaOptions struct {
	p samplingParams
}

// UnmarshalJSON reads an options object.
func (o *ollamaOptions) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return &fieldError{field: "options", msg: "options must be a JSON object"}
	}
	var p samplingParams
	float := func(key string, dst **float64) error {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return nil
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return &fieldError{field: key, msg: fmt.Sprintf("option %q must be a number", key)}
		}
		*dst = &f
		return nil
	}
	integer := func(key string, dst **int) error {
		raw, ok := m[key]
		if !ok || string(raw) == "null" {
			return nil
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
			return &fieldError{field: key, msg: fmt.Sprintf("option %q must be an integer", key)}
		}
		v := int(f)
		*dst = &v
		return nil
	}
	var seed *int
	for _, err := range []error{
		float("temperature", &p.Temperature),
		float("top_p", &p.TopP),
		float("min_p", &p.MinP),
		float("repeat_penalty", &p.RepeatPenalty),
		integer("top_k", &p.TopK),
		integer("repeat_last_n", &p.RepeatLastN),
		integer("num_predict", &p.MaxTokens),
		integer("seed", &seed),
	} {
		if err != nil {
			return err
		}
	}
	if seed != nil {
		v := int64(*seed)
		p.Seed = &v
	}
	if raw, ok := m["stop"]; ok {
		var stop stopList
		if err := json.Unmarshal(raw, &stop); err != nil {
			return &fieldError{field: "stop", msg: `option "stop" must be a string or an array of strings`}
		}
		p.Stop = stop
	}
	// num_predict: -1 means no limit and -2 until the context is full; both
	// are the engine's "until a stop condition or the context is full".
	if p.MaxTokens != nil && (*p.MaxTokens == -1 || *p.MaxTokens == -2) {
		p.MaxTokens = nil
	}
	p.maxTokensName = "num_predict"
	o.p = p
	return nil
}

// ollamaMetrics are Ollama's timing fields, plus meshllm's cached_tokens
// and queue_duration.
type ollamaMetrics struct {
	TotalDuration      time.Duration `json:"total_duration,omitempty"`
	LoadDuration       time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount    int           `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration,omitempty"`
	EvalCount          int           `json:"eval_count,omitempty"`
	EvalDuration       time.Duration `json:"eval_duration,omitempty"`
	// CachedTokens is how many of the prompt_eval_count tokens were reused
	// from the KV cache rather than evaluated.
	CachedTokens *int `json:"cached_tokens,omitempty"`
	// QueueDuration is the time spent waiting for a slot.
	QueueDuration time.Duration `json:"queue_duration,omitempty"`
}

type generateResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Response   string    `json:"response"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	ollamaMetrics
}

type ollamaChatResponse struct {
	Model      string        `json:"model"`
	CreatedAt  time.Time     `json:"created_at"`
	Message    ollamaMessage `json:"message"`
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason,omitempty"`
	ollamaMetrics
}

type modelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

type tagModel struct {
	Name       string       `json:"name"`
	Model      string       `json:"model"`
	ModifiedAt time.Time    `json:"modified_at"`
	Size       int64        `json:"size"`
	Digest     string       `json:"digest"`
	Details    modelDetails `json:"details"`
}

type psModel struct {
	Name          string       `json:"name"`
	Model         string       `json:"model"`
	Size          int64        `json:"size"`
	Digest        string       `json:"digest"`
	Details       modelDetails `json:"details"`
	ExpiresAt     time.Time    `json:"expires_at"`
	SizeVRAM      int64        `json:"size_vram"`
	ContextLength int          `json:"context_length"`
}

type showRequest struct {
	Model string `json:"model"`
	Name  string `json:"name"` // the older spelling
}

type showResponse struct {
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      modelDetails   `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   time.Time      `json:"modified_at"`
}
