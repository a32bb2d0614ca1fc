package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// generateRequest is the body of POST /api/generate. Fields not listed
// (context, think, shift, ...) are ignored.
type generateRequest struct {
	Model     string            `json:"model"`
	Prompt    string            `json:"prompt"`
	System    string            `json:"system"`
	Suffix    string            `json:"suffix"`
	Template  string            `json:"template"`
	Raw       bool              `json:"raw"`
	Stream    *bool             `json:"stream"`
	Format    json.RawMessage   `json:"format"`
	Images    []json.RawMessage `json:"images"`
	Options   ollamaOptions     `json:"options"`
	KeepAlive *keepAlive        `json:"keep_alive"`
	ollamaExtras
	meshllmField
}

// ollamaChatRequest is the body of POST /api/chat.
type ollamaChatRequest struct {
	Model     string          `json:"model"`
	Messages  []ollamaMessage `json:"messages"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Tools     []ollamaTool    `json:"tools"`
	Options   ollamaOptions   `json:"options"`
	KeepAlive *keepAlive      `json:"keep_alive"`
	// Truncate false turns dropping old messages off: a chat that does
	// not fit is a 400 (Ollama's field; default true).
	Truncate *bool `json:"truncate"`
	ollamaExtras
	meshllmField
}

// ollamaExtras are the fields /api/generate and /api/chat share beyond
// the prompt: logprobs, and think, which a model without a thinking mode
// refuses as Ollama does.
type ollamaExtras struct {
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs int             `json:"top_logprobs"`
	Think       json.RawMessage `json:"think"`
}

// ollamaLogprob is one generated token's log probability in Ollama's
// shape, with its top alternatives.
type ollamaLogprob struct {
	ollamaTokenLogprob
	TopLogprobs []ollamaTokenLogprob `json:"top_logprobs,omitempty"`
}

type ollamaTokenLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

// ollamaMessage is a chat message in Ollama's shape, in requests and
// replies.
type ollamaMessage struct {
	Role      string            `json:"role"`
	Content   string            `json:"content"`
	Images    []json.RawMessage `json:"images,omitempty"`
	ToolCalls []ollamaToolCall  `json:"tool_calls,omitempty"`
	// ToolName names, on a "tool" message, the function that answered.
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ollamaToolCall is one function call: Ollama's arguments are a JSON
// object, not a string as in OpenAI's.
type ollamaToolCall struct {
	ID       string             `json:"id,omitempty"`
	Function ollamaCallFunction `json:"function"`
}

type ollamaCallFunction struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ollamaTool is one entry of a chat request's tools.
type ollamaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// ollamaOptions are the options Ollama's runner accepts that change
// sampling, and num_ctx; other runner options (num_gpu, num_thread, ...) are
// accepted and ignored. A known option of the wrong type is refused, as
// Ollama does.
type ollamaOptions struct {
	p samplingParams
	// numCtx is the context the request asks for (0: the served one);
	// requestContext clamps it to the served context.
	numCtx int
}

// UnmarshalJSON reads an options object.
func (o *ollamaOptions) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return &fieldError{field: "options", msg: "options must be a JSON object"}
	}
	if e := refuseSamplers(m); e != nil {
		return &fieldError{field: e.param, msg: e.message}
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
	var seed, numCtx *int
	for _, err := range []error{
		float("temperature", &p.Temperature),
		float("top_p", &p.TopP),
		float("min_p", &p.MinP),
		float("repeat_penalty", &p.RepeatPenalty),
		float("presence_penalty", &p.PresencePenalty),
		float("frequency_penalty", &p.FrequencyPenalty),
		integer("top_k", &p.TopK),
		integer("repeat_last_n", &p.RepeatLastN),
		integer("num_predict", &p.MaxTokens),
		integer("seed", &seed),
		integer("num_ctx", &numCtx),
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
	if numCtx != nil {
		if *numCtx < 0 {
			return &fieldError{field: "num_ctx", msg: fmt.Sprintf(`option "num_ctx" must be >= 0, got %d`, *numCtx)}
		}
		o.numCtx = *numCtx
	}
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
	// TruncatedMessages is how many of a chat's oldest messages were
	// dropped to fit the context (also in X-Meshllm-Truncated-Messages).
	TruncatedMessages *int `json:"truncated_messages,omitempty"`
	// QueueDuration is the time spent waiting for a slot.
	QueueDuration time.Duration `json:"queue_duration,omitempty"`
}

type generateResponse struct {
	Model      string          `json:"model"`
	CreatedAt  time.Time       `json:"created_at"`
	Response   string          `json:"response"`
	Done       bool            `json:"done"`
	DoneReason string          `json:"done_reason,omitempty"`
	Logprobs   []ollamaLogprob `json:"logprobs,omitempty"`
	ollamaMetrics
}

type ollamaChatResponse struct {
	Model      string          `json:"model"`
	CreatedAt  time.Time       `json:"created_at"`
	Message    ollamaMessage   `json:"message"`
	Done       bool            `json:"done"`
	DoneReason string          `json:"done_reason,omitempty"`
	Logprobs   []ollamaLogprob `json:"logprobs,omitempty"`
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

// ollamaEmbedRequest is the body of POST /api/embed.
type ollamaEmbedRequest struct {
	Model string           `json:"model"`
	Input ollamaEmbedInput `json:"input"`
	// Truncate (default true) cuts an input longer than the embedding
	// context to fit it; false makes such an input a 400.
	Truncate *bool `json:"truncate"`
	// Dimensions, when set and below the model's width, cuts every vector
	// to that many dimensions (then normalises it again), as Ollama does.
	Dimensions int           `json:"dimensions"`
	KeepAlive  *keepAlive    `json:"keep_alive"`
	Options    ollamaOptions `json:"options"`
}

// ollamaEmbedInput is /api/embed's input: a string or an array of strings; null
// or "" is no input (which loads the model, as in Ollama).
type ollamaEmbedInput []string

// UnmarshalJSON accepts null, "text" or ["a", "b"]; a lone "" is no
// input.
func (in *ollamaEmbedInput) UnmarshalJSON(b []byte) error {
	l, err := stringOrList(b, "input", "invalid input type: input must be a string or an array of strings")
	if len(l) == 1 && l[0] == "" && bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		l = nil
	}
	*in = l
	return err
}

type ollamaEmbedResponse struct {
	Model           string        `json:"model"`
	Embeddings      [][]float32   `json:"embeddings"`
	TotalDuration   time.Duration `json:"total_duration,omitempty"`
	LoadDuration    time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount int           `json:"prompt_eval_count,omitempty"`
}

// ollamaEmbeddingsRequest is the body of the legacy POST /api/embeddings.
type ollamaEmbeddingsRequest struct {
	Model     string        `json:"model"`
	Prompt    string        `json:"prompt"`
	KeepAlive *keepAlive    `json:"keep_alive"`
	Options   ollamaOptions `json:"options"`
}

type ollamaEmbeddingsResponse struct {
	Embedding []float64 `json:"embedding"`
}
