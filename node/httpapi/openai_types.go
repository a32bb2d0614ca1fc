package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// chatRequest is the body of POST /v1/chat/completions. Fields not listed
// are ignored (llama.cpp server's extensions are listed); OpenAI fields
// this server cannot honour are listed in openAIRefused and refused rather
// than ignored.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	openAISampling
	Logprobs          *bool           `json:"logprobs"`
	TopLogprobs       *int            `json:"top_logprobs"`
	Tools             []chatTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"` // false: one call a reply; unset: one call when a grammar writes it (see chatToolPlan)
	ResponseFormat    *responseFormat `json:"response_format"`
	chatRefused
	openAIIgnored
	meshllmField
}

// chatRefused holds the chat fields OpenAI defines that this server does
// not honour: set to anything but null (or their no-op value), they get a
// 400 naming them (see refusedChatField).
type chatRefused struct {
	Audio           json.RawMessage `json:"audio"`
	FunctionCall    json.RawMessage `json:"function_call"`
	Functions       json.RawMessage `json:"functions"`
	LogitBias       json.RawMessage `json:"logit_bias"`
	Modalities      json.RawMessage `json:"modalities"`
	Prediction      json.RawMessage `json:"prediction"`
	ReasoningEffort json.RawMessage `json:"reasoning_effort"`
	Verbosity       json.RawMessage `json:"verbosity"`
	WebSearch       json.RawMessage `json:"web_search_options"`
	Store           json.RawMessage `json:"store"`
}

// openAIIgnored lists the OpenAI fields that describe the caller, not the
// answer, and are accepted without effect: user, metadata (tags for stored
// completions, which store=true would need), service_tier (there is one
// tier), safety_identifier, prompt_cache_key and prompt_cache_retention
// (every prompt's prefix is cached anyway).
type openAIIgnored struct {
	User                 json.RawMessage `json:"user"`
	Metadata             json.RawMessage `json:"metadata"`
	ServiceTier          json.RawMessage `json:"service_tier"`
	SafetyIdentifier     json.RawMessage `json:"safety_identifier"`
	PromptCacheKey       json.RawMessage `json:"prompt_cache_key"`
	PromptCacheRetention json.RawMessage `json:"prompt_cache_retention"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        promptValue     `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
	Echo          bool            `json:"echo"`
	Suffix        *string         `json:"suffix"`
	BestOf        *int            `json:"best_of"`
	Logprobs      *int            `json:"logprobs"` // legacy: 0..5 alternatives
	LogitBias     json.RawMessage `json:"logit_bias"`
	openAISampling
	openAIIgnored
	meshllmField
}

// openAISampling holds the sampling fields of both OpenAI requests,
// including llama.cpp server's extensions (top_k, min_p, repeat_penalty,
// repeat_last_n).
type openAISampling struct {
	Temperature      *float64 `json:"temperature"`
	TopP             *float64 `json:"top_p"`
	TopK             *int     `json:"top_k"`
	MinP             *float64 `json:"min_p"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	RepeatLastN      *int     `json:"repeat_last_n"`
	Seed             *int64   `json:"seed"`
	Stop             stopList `json:"stop"`
	N                *int     `json:"n"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	unsupportedSampling
}

// unsupportedSampling holds llama.cpp server's sampler fields this engine
// does not run (see refuseSamplers): decoded only to refuse them.
type unsupportedSampling struct {
	Mirostat       json.RawMessage `json:"mirostat"`
	TypicalP       json.RawMessage `json:"typical_p"`
	TFSZ           json.RawMessage `json:"tfs_z"`
	DynatempRange  json.RawMessage `json:"dynatemp_range"`
	XTCProbability json.RawMessage `json:"xtc_probability"`
	DRYMultiplier  json.RawMessage `json:"dry_multiplier"`
	Grammar        json.RawMessage `json:"grammar"`
	JSONSchema     json.RawMessage `json:"json_schema"`
}

// fields is u by JSON name, the given ones only.
func (u *unsupportedSampling) fields() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for name, raw := range map[string]json.RawMessage{
		"mirostat": u.Mirostat, "typical_p": u.TypicalP, "tfs_z": u.TFSZ, "dynatemp_range": u.DynatempRange,
		"xtc_probability": u.XTCProbability, "dry_multiplier": u.DRYMultiplier, "grammar": u.Grammar, "json_schema": u.JSONSchema,
	} {
		if raw != nil {
			m[name] = raw
		}
	}
	return m
}

// responseFormat is a chat request's response_format.
type responseFormat struct {
	Type       string          `json:"type"` // "text", "json_object" or "json_schema"
	JSONSchema *jsonSchemaSpec `json:"json_schema"`
}

// jsonSchemaSpec is response_format.json_schema.
type jsonSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"` // accepted: the grammar enforces the schema either way
}

// chatTool is one entry of a chat request's tools.
type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    messageContent  `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    json.RawMessage `json:"refusal,omitempty"` // an earlier reply's refusal: not rendered
}

// chatToolCall is one tool call of an assistant message, in a request or
// a reply; Index is set in streamed deltas only.
type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatToolFunction `json:"function"`
}

// chatToolFunction is a tool call's function: Arguments is a JSON object
// encoded as a string, as OpenAI sends it.
type chatToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// messageContent is a message's content: a string, null, or an array of
// parts of which only text parts are supported.
type messageContent struct {
	Text string
	Set  bool // false for null or absent
}

// UnmarshalJSON accepts "text", null, or [{"type":"text","text":"..."}].
func (c *messageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*c = messageContent{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &c.Text); err != nil {
			return err
		}
		c.Set = true
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return &fieldError{field: "content", msg: "message content must be a string or an array of content parts"}
	}
	var buf bytes.Buffer
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return &fieldError{field: "content", msg: fmt.Sprintf("content parts of type %q are not supported: this model reads text only", p.Type)}
		}
		buf.WriteString(*p.Text)
	}
	*c = messageContent{Text: buf.String(), Set: true}
	return nil
}

// promptValue is a completion prompt: a string, an array of one string, an
// array of token IDs, or an array of one array of token IDs.
type promptValue struct {
	Text   string
	Tokens []int32
	Set    bool // a prompt was given
	IsToks bool // Tokens holds the prompt
}

// UnmarshalJSON accepts the four shapes OpenAI documents, with one prompt.
func (p *promptValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*p = promptValue{}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		p.Set = true
		return json.Unmarshal(b, &p.Text)
	}
	var strs []string
	if err := json.Unmarshal(b, &strs); err == nil {
		if len(strs) != 1 {
			return &fieldError{field: "prompt", msg: fmt.Sprintf("exactly one prompt per request is supported, got %d", len(strs))}
		}
		p.Text, p.Set = strs[0], true
		return nil
	}
	var toks []int32
	if err := json.Unmarshal(b, &toks); err == nil {
		p.Tokens, p.Set, p.IsToks = toks, true, true
		return nil
	}
	var batches [][]int32
	if err := json.Unmarshal(b, &batches); err == nil {
		if len(batches) != 1 {
			return &fieldError{field: "prompt", msg: fmt.Sprintf("exactly one prompt per request is supported, got %d", len(batches))}
		}
		p.Tokens, p.Set, p.IsToks = batches[0], true, true
		return nil
	}
	return &fieldError{field: "prompt", msg: "prompt must be a string, an array of one string, or an array of token IDs"}
}

// usage is OpenAI's token accounting.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// timings reports how a reply was produced, under llama.cpp server's key
// and names so tools that read llama.cpp's timings read these; queue_ms and
// ttft_ms are meshllm's additions.
type timings struct {
	CacheN              int     `json:"cache_n"`                // prompt tokens reused from the KV cache
	PromptN             int     `json:"prompt_n"`               // prompt tokens prefilled
	PromptMS            float64 `json:"prompt_ms"`              // prefill time
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`    // prefill time per prefilled token
	PromptPerSecond     float64 `json:"prompt_per_second"`      // prefill speed
	PredictedN          int     `json:"predicted_n"`            // generated tokens
	PredictedMS         float64 `json:"predicted_ms"`           // decode time after the first token
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"` // decode time per token after the first
	PredictedPerSecond  float64 `json:"predicted_per_second"`   // decode speed
	QueueMS             float64 `json:"queue_ms"`               // waiting for a slot
	TTFTMS              float64 `json:"ttft_ms"`                // Generate's call to the first token
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             usage        `json:"usage"`
	meshExtras
}

// meshExtras are meshllm's additions to a reply (the final chunk, when
// streaming): llama.cpp server's timings, and how many of the oldest
// messages were dropped to fit the context.
type meshExtras struct {
	Timings           *timings `json:"timings,omitempty"`
	TruncatedMessages int      `json:"truncated_messages,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatReply     `json:"message"`
	FinishReason string        `json:"finish_reason"`
	Logprobs     *chatLogprobs `json:"logprobs"`
}

type chatReply struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"` // null when the reply is only tool calls
	Refusal   *string        `json:"refusal"` // always null: the model does not refuse in a separate channel
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	Usage             *usage            `json:"usage,omitempty"`
	meshExtras
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *chatLogprobs `json:"logprobs"`
}

type chatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   json.RawMessage `json:"refusal,omitempty"` // null in the first chunk, as OpenAI sends it
	ToolCalls []chatToolCall  `json:"tool_calls,omitempty"`
}

// chatLogprobs is a chat choice's logprobs (OpenAI's shape; refusal is
// always null).
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal []chatTokenLogprob `json:"refusal"`
}

// chatTokenLogprob is one token's entry in chatLogprobs.Content.
type chatTokenLogprob struct {
	Token       string            `json:"token"`
	Logprob     float32           `json:"logprob"`
	Bytes       []int             `json:"bytes"`
	TopLogprobs []chatTopLogprobs `json:"top_logprobs"`
}

type chatTopLogprobs struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
	meshExtras
}

type textChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *textLogprobs `json:"logprobs"`
}

// textLogprobs is the legacy completions logprobs shape: parallel arrays,
// TextOffset counting bytes from the start of the choice's text.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// meshllm's additions.
	ContextLength int    `json:"context_length,omitempty"`
	Architecture  string `json:"architecture,omitempty"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}
