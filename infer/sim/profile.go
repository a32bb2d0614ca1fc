package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// Profile is the cost model of one model on one machine. Times are in
// seconds (float, so that sub-nanosecond attention terms survive).
//
// Prefilling u uncached prompt tokens after c cached ones costs
//
//	PrefillBase + u*PrefillToken + PrefillAttention*(u*c + u*(u-1)/2)
//
// that is a fixed cost per request, a cost per token (the weights'
// matrix products) and a cost per token and context token (attention over
// the KV cache: token i of the prompt attends to c+i earlier ones).
//
// Each generated token after the first (which comes out of the prefill)
// costs DecodeToken + DecodeAttention*p at context length p.
//
// Concurrency: Slots requests hold a KV slot at once; of those, Parallel
// compute at full speed and the others wait for a turn, prefill in chunks of
// BatchTokens and decode a token at a time (a CPU has Parallel 1: requests
// interleave but do not speed each other up; a GPU batches: Parallel up to
// Slots). Requests beyond Slots queue, up to QueueLimit; more fail with
// infer.ErrBusy.
type Profile struct {
	// Name is the model name the engine reports ("qwen2.5-0.5b").
	Name string `json:"name"`
	// Description says where the figures come from.
	Description string `json:"description,omitempty"`
	// Parameters is the model's weight count (reported, not used in costs).
	Parameters uint64 `json:"parameters,omitempty"`
	// ContextLength is the most prompt plus reply tokens of one request.
	ContextLength int `json:"context_length"`
	// VocabSize is the tokenizer's vocabulary size (ids 0..2 are special:
	// <unk>, BOS, EOS).
	VocabSize int `json:"vocab_size"`

	// Slots is the number of KV slots (parallel sequences).
	Slots int `json:"slots"`
	// Parallel is how many slots compute at once at full speed; default 1.
	Parallel int `json:"parallel,omitempty"`
	// CacheCells is the KV cells shared by all slots; default
	// Slots*ContextLength. At least ContextLength.
	CacheCells int `json:"cache_cells,omitempty"`
	// QueueLimit is how many requests may wait for a slot; default 4*Slots.
	QueueLimit int `json:"queue_limit,omitempty"`
	// BatchTokens is the prefill chunk (llama.cpp's n_batch); default 512.
	BatchTokens int `json:"batch_tokens,omitempty"`

	PrefillBase      float64 `json:"prefill_base_s"`      // seconds per request
	PrefillToken     float64 `json:"prefill_token_s"`     // seconds per uncached token
	PrefillAttention float64 `json:"prefill_attention_s"` // seconds per token per context token
	DecodeToken      float64 `json:"decode_token_s"`      // seconds per generated token
	DecodeAttention  float64 `json:"decode_attention_s"`  // seconds per generated token per context token

	// ReplyTokens is the mean reply length when a request sets no
	// MaxTokens: every generated token ends the reply (EOS) with
	// probability 1/ReplyTokens. 0 means replies end only at MaxTokens or
	// the context limit.
	ReplyTokens int `json:"reply_tokens,omitempty"`
}

// PrefillTime is the modelled time to prefill uncached tokens after cached
// ones (including the per-request base).
func (p Profile) PrefillTime(uncached, cached int) time.Duration {
	if uncached <= 0 {
		return 0
	}
	return secs(p.PrefillBase) + p.prefillChunk(uncached, cached)
}

// prefillChunk is the cost of n tokens at positions from..from+n-1, without
// the base; chunks add up to the whole prefill.
func (p Profile) prefillChunk(n, from int) time.Duration {
	u, c := float64(n), float64(from)
	return secs(u*p.PrefillToken + p.PrefillAttention*(u*c+u*(u-1)/2))
}

// DecodeTime is the modelled time of one decode step at context length pos.
func (p Profile) DecodeTime(pos int) time.Duration {
	return secs(p.DecodeToken + p.DecodeAttention*float64(pos))
}

func secs(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// WithDefaults returns p with unset optional fields filled in.
func (p Profile) WithDefaults() Profile {
	if p.Parallel <= 0 {
		p.Parallel = 1
	}
	if p.CacheCells <= 0 {
		p.CacheCells = p.Slots * p.ContextLength
	}
	if p.QueueLimit <= 0 {
		p.QueueLimit = 4 * p.Slots
	}
	if p.BatchTokens <= 0 {
		p.BatchTokens = 512
	}
	return p
}

// Validate reports the first invalid field of p (after WithDefaults).
func (p Profile) Validate() error {
	p = p.WithDefaults()
	switch {
	case p.Name == "":
		return fmt.Errorf("sim profile: no name")
	case p.ContextLength < 2:
		return fmt.Errorf("sim profile %s: context_length %d < 2", p.Name, p.ContextLength)
	case p.VocabSize < 4:
		return fmt.Errorf("sim profile %s: vocab_size %d < 4", p.Name, p.VocabSize)
	case p.Slots < 1:
		return fmt.Errorf("sim profile %s: slots %d < 1", p.Name, p.Slots)
	case p.CacheCells < p.ContextLength:
		return fmt.Errorf("sim profile %s: cache_cells %d < context_length %d", p.Name, p.CacheCells, p.ContextLength)
	case p.ContextLength > 1<<24 || p.VocabSize > 1<<24 || p.Slots > 4096 || p.Parallel > 4096 ||
		p.CacheCells > 1<<30 || p.QueueLimit > 1<<20 || p.BatchTokens > 1<<20:
		return fmt.Errorf("sim profile %s: implausible size (context %d, vocab %d, slots %d, parallel %d, cells %d, queue %d, batch %d)",
			p.Name, p.ContextLength, p.VocabSize, p.Slots, p.Parallel, p.CacheCells, p.QueueLimit, p.BatchTokens)
	case p.ReplyTokens < 0:
		return fmt.Errorf("sim profile %s: reply_tokens %d < 0", p.Name, p.ReplyTokens)
	}
	for name, v := range map[string]float64{
		"prefill_base_s": p.PrefillBase, "prefill_token_s": p.PrefillToken,
		"prefill_attention_s": p.PrefillAttention, "decode_token_s": p.DecodeToken,
		"decode_attention_s": p.DecodeAttention,
	} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > 3600 {
			return fmt.Errorf("sim profile %s: %s = %g out of range [0, 3600]", p.Name, name, v)
		}
	}
	return nil
}

// LoadProfile reads a JSON profile from path, or returns the preset of
// that name when path names one.
func LoadProfile(path string) (Profile, error) {
	if p, ok := Preset(path); ok {
		if _, err := os.Stat(path); err != nil {
			return p, nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, err
	}
	return ParseProfile(b)
}

// ParseProfile decodes and validates a JSON profile; unknown fields are an
// error, so a typo does not silently fall back to a default.
func ParseProfile(b []byte) (Profile, error) {
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("sim profile: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

// Save writes p as indented JSON to path.
func (p Profile) Save(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
