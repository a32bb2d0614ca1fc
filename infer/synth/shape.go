package synth

import "fmt"

// Shape is the architecture and size of a model.
type Shape struct {
	Name    string // shape name ("qwen2.5-0.5b")
	Arch    string // GGUF general.architecture: "llama" or "qwen2"
	Layers  int    // transformer blocks
	Embd    int    // model width (hidden size)
	Heads   int    // attention heads
	KVHeads int    // key/value heads (grouped-query attention)
	FFN     int    // feed-forward width (intermediate size)
	Vocab   int    // vocabulary size
	Context int    // training context length

	RopeBase float32 // RoPE frequency base (rope_theta)
	NormEps  float32 // RMSNorm epsilon
	// TiedEmbeddings: the output projection reuses token_embd (no output.weight).
	TiedEmbeddings bool
	// QKVBias: the q, k and v projections have biases (Qwen2).
	QKVBias bool
	// ChatTemplate is written as tokenizer.chat_template; its special
	// tokens are in the vocabulary as control tokens.
	ChatTemplate  string
	ControlTokens []string
}

// HeadDim is the width of one attention head.
func (s Shape) HeadDim() int { return s.Embd / s.Heads }

// Shapes returns the built-in shapes. The figures are those of the models'
// published configurations (config.json): Qwen2.5-0.5B-Instruct and
// Llama-3.2-1B-Instruct; tiny is a stories260K-sized llama for tests.
func Shapes() []Shape {
	const chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	const llama3 = "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
	return []Shape{
		{
			Name: "tiny", Arch: "llama",
			Layers: 2, Embd: 64, Heads: 4, KVHeads: 2, FFN: 192, Vocab: 512, Context: 2048,
			RopeBase: 10000, NormEps: 1e-5,
		},
		{
			Name: "qwen2.5-0.5b", Arch: "qwen2",
			Layers: 24, Embd: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, Context: 32768,
			RopeBase: 1000000, NormEps: 1e-6, TiedEmbeddings: true, QKVBias: true,
			ChatTemplate: chatml, ControlTokens: []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
		},
		{
			Name: "llama3.2-1b", Arch: "llama",
			Layers: 16, Embd: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Context: 131072,
			RopeBase: 500000, NormEps: 1e-5, TiedEmbeddings: true,
			ChatTemplate: llama3, ControlTokens: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
		},
	}
}

// LookupShape returns the built-in shape of that name.
func LookupShape(name string) (Shape, error) {
	var names []string
	for _, s := range Shapes() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Shape{}, fmt.Errorf("unknown shape %q (have %v)", name, names)
}

// Validate checks that s describes a model llama.cpp can build.
func (s Shape) Validate() error {
	switch {
	case s.Arch != "llama" && s.Arch != "qwen2":
		return fmt.Errorf("shape %s: architecture %q not supported (llama, qwen2)", s.Name, s.Arch)
	case s.Layers < 1 || s.Embd < 1 || s.FFN < 1 || s.Context < 1:
		return fmt.Errorf("shape %s: layers, embd, ffn and context must be positive", s.Name)
	case s.Heads < 1 || s.KVHeads < 1 || s.Embd%s.Heads != 0 || s.Heads%s.KVHeads != 0:
		return fmt.Errorf("shape %s: %d heads, %d KV heads do not divide width %d", s.Name, s.Heads, s.KVHeads, s.Embd)
	case s.HeadDim()%2 != 0:
		return fmt.Errorf("shape %s: head width %d is odd (RoPE needs pairs)", s.Name, s.HeadDim())
	case s.Embd%32 != 0 || s.FFN%32 != 0:
		return fmt.Errorf("shape %s: embd and ffn must be multiples of 32", s.Name)
	case s.Vocab < minVocab+len(s.ControlTokens):
		return fmt.Errorf("shape %s: vocabulary %d smaller than the %d fixed tokens", s.Name, s.Vocab, minVocab+len(s.ControlTokens))
	case s.Vocab > 1<<24 || s.Layers > 1024 || s.Embd > 1<<16 || s.FFN > 1<<18:
		return fmt.Errorf("shape %s: implausibly large", s.Name)
	}
	return nil
}

// Parameters is the number of weights of the shape (tied embeddings
// counted once), as model cards count them.
func (s Shape) Parameters() uint64 {
	var n uint64
	for _, t := range s.tensors() {
		n += t.elements()
	}
	return n
}

// tensor is one weight of the model, in llama.cpp's GGUF naming.
type tensor struct {
	name   string
	dims   []uint64 // ggml order: innermost (input) first
	matrix bool     // 2-D weights take Options.Type; norms and biases stay F32
	norm   bool     // initialised to 1 (RMSNorm gains), not random
}

func (t tensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

// tensors lists the model's tensors in the order llama.cpp's converter
// writes them.
func (s Shape) tensors() []tensor {
	e, ff, v := uint64(s.Embd), uint64(s.FFN), uint64(s.Vocab)
	q, kv := uint64(s.Heads*s.HeadDim()), uint64(s.KVHeads*s.HeadDim())
	ts := []tensor{{name: "token_embd.weight", dims: []uint64{e, v}, matrix: true}}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			tensor{name: p + "attn_norm.weight", dims: []uint64{e}, norm: true},
			tensor{name: p + "attn_q.weight", dims: []uint64{e, q}, matrix: true},
			tensor{name: p + "attn_k.weight", dims: []uint64{e, kv}, matrix: true},
			tensor{name: p + "attn_v.weight", dims: []uint64{e, kv}, matrix: true},
		)
		if s.QKVBias {
			ts = append(ts,
				tensor{name: p + "attn_q.bias", dims: []uint64{q}},
				tensor{name: p + "attn_k.bias", dims: []uint64{kv}},
				tensor{name: p + "attn_v.bias", dims: []uint64{kv}},
			)
		}
		ts = append(ts,
			tensor{name: p + "attn_output.weight", dims: []uint64{q, e}, matrix: true},
			tensor{name: p + "ffn_norm.weight", dims: []uint64{e}, norm: true},
			tensor{name: p + "ffn_gate.weight", dims: []uint64{e, ff}, matrix: true},
			tensor{name: p + "ffn_up.weight", dims: []uint64{e, ff}, matrix: true},
			tensor{name: p + "ffn_down.weight", dims: []uint64{ff, e}, matrix: true},
		)
	}
	ts = append(ts, tensor{name: "output_norm.weight", dims: []uint64{e}, norm: true})
	if !s.TiedEmbeddings {
		ts = append(ts, tensor{name: "output.weight", dims: []uint64{e, v}, matrix: true})
	}
	return ts
}
