package infer

import (
	"context"
	"encoding/json"
	"time"
)

// Engine is a loaded model serving generation requests.
//
// Engine implementations are safe for concurrent use. Generate blocks until
// the request finishes, fails or ctx is cancelled; a cancelled request stops
// generating promptly and frees its slot.
type Engine interface {
	// Info describes the loaded model.
	Info() ModelInfo
	// Tokenize turns text into the model's tokens, adding the BOS token when
	// the model wants one and parsing special tokens (as chat templates emit).
	Tokenize(text string) ([]int32, error)
	// Render applies the model's chat template to messages (and the tools
	// the model may call; nil for none) and returns the prompt text, ending
	// where the assistant's reply begins.
	Render(messages []Message, tools []Tool) (string, error)
	// Generate prefills req.Prompt (reusing the longest cached prefix) and
	// decodes until a stop condition, calling emit for each piece of text in
	// order. If emit returns an error, generation stops and Generate returns
	// that error. The Result is non-nil whenever err is nil.
	Generate(ctx context.Context, req Request, emit func(Piece) error) (*Result, error)
	// CachedPrefix returns how many leading tokens of tokens the engine's KV
	// cache holds right now (the exact local match the router uses).
	CachedPrefix(tokens []int32) int
	// Stats reports the engine's load and cache occupancy.
	Stats() Stats
	// Close stops the engine, failing queued requests with ErrClosed, and
	// frees the model.
	Close() error
}

// Embedder is an engine that also computes embeddings (/v1/embeddings,
// /api/embed). Implementations are safe for concurrent use.
type Embedder interface {
	// Embed returns one vector per input (each a tokenized text), pooled
	// over its tokens as the model's pooling type says (mean when it has
	// none) and L2-normalised. Inputs are served in batches; an input
	// longer than the embedding context is an ErrBadRequest (a
	// *ContextError).
	Embed(ctx context.Context, inputs [][]int32) ([][]float32, error)
}

// ModelInfo describes a loaded model.
type ModelInfo struct {
	// Name is how clients address the model ("stories260K", "qwen2.5:0.5b").
	Name string `json:"name"`
	// ID identifies the model's weights and tokenizer: equal IDs mean equal
	// token IDs and equal KV contents. It seeds the cache digests.
	ID string `json:"id"`
	// Path is the GGUF file the model was loaded from ("" for sim models).
	Path string `json:"path,omitempty"`
	// Architecture is the GGUF general.architecture ("llama", "qwen2").
	Architecture string `json:"architecture"`
	// Parameters is the number of weights.
	Parameters uint64 `json:"parameters"`
	// ContextLength is the longest prompt plus reply one request may use.
	ContextLength int `json:"context_length"`
	// TrainContextLength is the context the model was trained with.
	TrainContextLength int `json:"train_context_length"`
	// VocabSize is the number of tokens in the vocabulary.
	VocabSize int `json:"vocab_size"`
	// EmbeddingLength is the width of the model's embeddings (0 if the
	// engine serves none).
	EmbeddingLength int `json:"embedding_length,omitempty"`
	// EmbedContextLength is the longest input (in tokens) Embed accepts;
	// longer ones fail with a *ContextError (0 if the engine serves no
	// embeddings).
	EmbedContextLength int `json:"embed_context_length,omitempty"`
	// Template names the chat template family used ("chatml", "llama3",
	// "plain", ...).
	Template string `json:"template"`
	// ToolFormat names the format the model's tool calls are parsed in
	// (infer.ToolFormat: "hermes", "llama3-json", "mistral", "generic",
	// ...); "" if the engine does not do tool calls.
	ToolFormat string `json:"tool_format,omitempty"`
	// Quantization names the weight type ("F32", "Q4_K_M", ...).
	Quantization string `json:"quantization,omitempty"`
	// SizeBytes is the model file's size.
	SizeBytes int64 `json:"size_bytes"`
	// ModifiedAt is the model file's modification time.
	ModifiedAt time.Time `json:"modified_at"`
}

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant", "tool"
	Content string `json:"content"`
	// ToolCalls are the function calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, on a "tool" message, the ID of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is, on a "tool" message, the name of the function that answered.
	Name string `json:"name,omitempty"`
}

// Tool is a function the model may call (OpenAI's and Ollama's "tools").
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments object (may be nil).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is one function call in a model's reply.
type ToolCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is a JSON object.
	Arguments json.RawMessage `json:"arguments"`
}

// Request is one generation request, already tokenized.
type Request struct {
	Prompt   []int32
	Sampling Sampling
}

// Sampling holds the sampling parameters of a request. The zero value of a
// field means "the engine's default" except where stated.
type Sampling struct {
	// Temperature; 0 selects greedy decoding; negative means unset, and the
	// engine uses 0.8 (llama.cpp's and Ollama's default).
	Temperature float32
	// TopP nucleus sampling; 0 or 1 disables it.
	TopP float32
	// TopK keeps the K most likely tokens; 0 disables it.
	TopK int
	// MinP drops tokens below MinP times the most likely one's probability.
	MinP float32
	// RepeatPenalty over the last RepeatLastN tokens; 0 or 1 disables it.
	RepeatPenalty float32
	RepeatLastN   int
	// Seed for the sampler; requests with equal seeds and inputs give equal
	// outputs. Negative means random.
	Seed int64
	// MaxTokens bounds the reply; 0 means "until the context is full".
	MaxTokens int
	// Stop strings end generation; the stop string is not returned.
	Stop []string
	// PresencePenalty and FrequencyPenalty (OpenAI's, -2..2) lower the
	// logits of tokens already in the last RepeatLastN tokens: by a
	// constant, and by their count. 0 disables them.
	PresencePenalty  float32
	FrequencyPenalty float32
	// Constraint restricts what may be generated (structured outputs, tool
	// calls); nil means none.
	Constraint *Constraint
	// Logprobs asks for each generated token's log probability in
	// Piece.Logprobs, with the TopLogprobs (0..MaxTopLogprobs) most likely
	// alternatives.
	Logprobs    bool
	TopLogprobs int
}

// MaxTopLogprobs is the most alternatives a token's logprobs may list
// (OpenAI's limit).
const MaxTopLogprobs = 20

// MaxSchemaBytes bounds Constraint.JSONSchema (and the grammar built from
// it); Prefix and Suffix are bounded by MaxAffixBytes.
const (
	MaxSchemaBytes = 64 << 10
	MaxAffixBytes  = 256
)

// Constraint restricts generation with a grammar (llama.cpp's GBNF, built
// by the serving engine): the output is Prefix, then one JSON value that
// satisfies JSONSchema, then Suffix, and generation ends there. A schema
// of {"type":"object"} asks for any JSON object (json_object mode). It
// travels with a forwarded request, so any peer enforces the same output.
type Constraint struct {
	JSONSchema string `json:"json_schema"`
	Prefix     string `json:"prefix,omitempty"`
	Suffix     string `json:"suffix,omitempty"`
}

// Piece is a piece of generated text.
type Piece struct {
	// Text is the text to show; it may be empty while a possible stop string
	// or an incomplete UTF-8 sequence is held back.
	Text string
	// Tokens is how many tokens this piece accounts for.
	Tokens int
	// Logprobs has one entry per token the piece accounts for, when the
	// request asked for them (Sampling.Logprobs).
	Logprobs []TokenLogprob
}

// TokenLogprob is one generated token's log probability under the model
// (natural log, before sampling's truncation), and its most likely
// alternatives at that position, most likely first.
type TokenLogprob struct {
	Token   string       `json:"token"`
	Logprob float32      `json:"logprob"`
	Top     []TopLogprob `json:"top_logprobs,omitempty"`
}

// TopLogprob is one alternative token at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
}

// Finish reasons.
const (
	FinishStop   = "stop"   // end-of-generation token or a stop string
	FinishLength = "length" // MaxTokens or the context limit was reached
)

// Result reports how a request was served.
type Result struct {
	PromptTokens    int           `json:"prompt_tokens"`
	CachedTokens    int           `json:"cached_tokens"` // prompt tokens reused from the KV cache
	GeneratedTokens int           `json:"generated_tokens"`
	QueueWait       time.Duration `json:"queue_wait_ns"`    // from Generate's call until a slot was assigned
	PrefillDuration time.Duration `json:"prefill_ns"`       // prefilling the uncached prompt tokens
	DecodeDuration  time.Duration `json:"decode_ns"`        // generating after the first token
	TimeToFirst     time.Duration `json:"time_to_first_ns"` // from Generate's call to the first token
	FinishReason    string        `json:"finish_reason"`    // FinishStop or FinishLength
	Slot            int           `json:"slot"`             // KV slot that served it
}

// PrefillTokensPerSecond is the prefill speed over uncached prompt tokens.
func (r *Result) PrefillTokensPerSecond() float64 {
	return perSecond(r.PromptTokens-r.CachedTokens, r.PrefillDuration)
}

// DecodeTokensPerSecond is the generation speed after the first token.
func (r *Result) DecodeTokensPerSecond() float64 {
	return perSecond(r.GeneratedTokens-1, r.DecodeDuration)
}

func perSecond(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Stats is a snapshot of an engine's load and cache occupancy.
type Stats struct {
	Slots       int `json:"slots"`        // KV slots (parallel sequences)
	Active      int `json:"active"`       // requests holding a slot now
	Queued      int `json:"queued"`       // requests waiting for a slot
	QueueLimit  int `json:"queue_limit"`  // queued requests beyond which Generate fails with ErrBusy
	CacheCells  int `json:"cache_cells"`  // KV cells holding cached tokens
	CacheLimit  int `json:"cache_limit"`  // KV cells in all
	CachedSeqs  int `json:"cached_seqs"`  // distinct cached sequences (radix tree leaves)
	ServedTotal int `json:"served_total"` // requests finished since start
}
