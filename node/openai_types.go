package node

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// chatRequest is the body of POST /v1/chat/completions. Fields not listed
// are ignored; unsupported features that change the answer's meaning (n>1,
// tools, JSON mode, logprobs) are refused rather than ignored.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	openAISampling
	Tools          json.RawMessage `json:"tools"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model         string         `json:"model"`
	Prompt        promptValue    `json:"prompt"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	MaxTokens     *int           `json:"max_tokens"`
	Echo          bool           `json:"echo"`
	Suffix        *string        `json:"suffix"`
	BestOf        *int           `json:"best_of"`
	openAISampling
}

// openAISampling holds the sampling fields of both OpenAI requests,
// including llama.cpp server's extensions (top_k, min_p, repeat_penalty,
// repeat_last_n).
type openAISampling struct {
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	TopK             *int            `json:"top_k"`
	MinP             *float64        `json:"min_p"`
	RepeatPenalty    *float64        `json:"repeat_penalty"`
	RepeatLastN      *int            `json:"repeat_last_n"`
	Seed             *int64          `json:"seed"`
	Stop             stopList        `json:"stop"`
	N                *int            `json:"n"`
	Logprobs         json.RawMessage `json:"logprobs"`
	PresencePenalty  *float64        `json:"presence_penalty"`  // accepted, ignored
	FrequencyPenalty *float64        `json:"frequency_penalty"` // accepted, ignored
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role    string         `json:"role"`
	Content messageContent `json:"content"`
	Name    string         `json:"name,omitempty"`
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
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
	Timings *timings     `json:"timings,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatReply       `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type chatReply struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage,omitempty"`
	Timings *timings          `json:"timings,omitempty"`
}

type chatChunkChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type textCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []textChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
	Timings *timings     `json:"timings,omitempty"`
}

type textChoice struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
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
