package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/meshllm/meshllm/infer"
)

// maxEmbedTokens bounds the tokens of all inputs of one embeddings request
// together (OpenAI's limit), so one request cannot hold the engine for
// MaxEmbedInputs full contexts.
const maxEmbedTokens = 300_000

// embeddingRequest is the body of POST /v1/embeddings.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          embedInput      `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           json.RawMessage `json:"user"` // accepted, as in every OpenAI request
}

// embedInput is the input of an embeddings request: a string, an array of
// strings, an array of token IDs, or an array of arrays of token IDs.
type embedInput struct {
	texts  []string
	tokens [][]int32
	set    bool
}

// UnmarshalJSON accepts the four shapes OpenAI documents.
func (in *embedInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*in = embedInput{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		in.texts, in.set = []string{s}, true
		return nil
	}
	bad := &fieldError{field: "input", msg: "input must be a string, an array of strings, an array of token IDs or an array of arrays of token IDs"}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return bad
	}
	if len(raw) > infer.MaxEmbedInputs {
		return &fieldError{field: "input", msg: fmt.Sprintf("%d inputs, at most %d", len(raw), infer.MaxEmbedInputs)}
	}
	in.set = true
	if len(raw) == 0 {
		return nil
	}
	switch first := bytes.TrimSpace(raw[0]); {
	case len(first) > 0 && first[0] == '"':
		if err := json.Unmarshal(b, &in.texts); err != nil {
			return bad
		}
	case len(first) > 0 && first[0] == '[':
		if err := json.Unmarshal(b, &in.tokens); err != nil {
			return bad
		}
	default:
		var one []int32
		if err := json.Unmarshal(b, &one); err != nil {
			return bad
		}
		in.tokens = [][]int32{one}
	}
	return nil
}

type embeddingList struct {
	Object string           `json:"object"`
	Data   []embeddingEntry `json:"data"`
	Model  string           `json:"model"`
	Usage  embeddingUsage   `json:"usage"`
}

type embeddingEntry struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// errNoEmbeddings is the answer of a peer whose model serves no
// embeddings.
func (s *Server) errNoEmbeddings() *apiError {
	return &apiError{status: http.StatusNotImplemented, typ: typeInvalidRequest, param: "model", code: "embeddings_not_supported",
		message: fmt.Sprintf("%s serves no embeddings on this peer: start it with an embedding model", s.gen.Info().Name)}
}

// handleEmbeddings serves POST /v1/embeddings on this peer (embeddings
// are never forwarded).
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	out, e := s.embed(r.Context(), &req)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// embed validates an embeddings request and serves it on what the
// embedding endpoints serve with (the Generator, or WithEmbeddings' model).
func (s *Server) embed(ctx context.Context, req *embeddingRequest) (*embeddingList, *apiError) {
	if req.Model == "" {
		return nil, missingField("model")
	}
	emb, ok := s.embedder()
	model, found := s.resolveModel(req.Model)
	if !found && ok && strings.EqualFold(strings.TrimSpace(req.Model), emb.Info().Name) {
		model, found = emb.Info().Name, true // a separate embedding model, by its name
	}
	if !found {
		return nil, modelNotFound(req.Model)
	}
	if !ok {
		return nil, s.errNoEmbeddings()
	}
	info := emb.Info()
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return nil, badRequest("encoding_format", `encoding_format must be "float" or "base64", got %q`, req.EncodingFormat)
	}
	dims := info.EmbeddingLength
	if d := req.Dimensions; d != nil {
		if *d < 1 || *d > info.EmbeddingLength {
			return nil, badRequest("dimensions", "dimensions must be between 1 and %d (the model's embedding width), got %d", info.EmbeddingLength, *d)
		}
		dims = *d
	}
	inputs, e := embedInputs(emb, req.Input)
	if e != nil {
		return nil, e
	}
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	vecs, err := emb.Embed(ctx, inputs)
	if err == nil && len(vecs) != len(inputs) {
		err = fmt.Errorf("%w: %d embeddings for %d inputs", infer.ErrEngine, len(vecs), len(inputs))
	}
	if err != nil {
		return nil, embedError(err, s)
	}
	out := &embeddingList{Object: "list", Model: model, Data: make([]embeddingEntry, len(vecs))}
	for i, v := range vecs {
		if len(v) < dims {
			return nil, classify(fmt.Errorf("%w: an embedding of %d values, the model's width is %d", infer.ErrEngine, len(v), dims), dialectOpenAI)
		}
		if dims < len(v) {
			// Matryoshka truncation: the leading dimensions, renormalised.
			v = infer.Normalize(append([]float32(nil), v[:dims]...))
		}
		out.Data[i] = embeddingEntry{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			out.Data[i].Embedding = base64Floats(v)
		}
		out.Usage.PromptTokens += len(inputs[i])
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	return out, nil
}

// embedInputs tokenizes an embeddings request's input and checks its
// bounds: 1..MaxEmbedInputs inputs, none empty or longer than the
// embedding context, maxEmbedTokens in all.
func embedInputs(emb Embeddings, in embedInput) ([][]int32, *apiError) {
	info := emb.Info()
	if !in.set {
		return nil, missingField("input")
	}
	inputs := in.tokens
	if in.texts != nil {
		inputs = make([][]int32, len(in.texts))
		for i, text := range in.texts {
			if text == "" {
				return nil, badRequest("input", "input[%d] is empty", i)
			}
			toks, err := emb.Tokenize(text)
			if err != nil {
				return nil, classify(fmt.Errorf("tokenizing input %d: %w", i, err), dialectOpenAI)
			}
			inputs[i] = toks
		}
	}
	if len(inputs) == 0 {
		return nil, badRequest("input", "input is empty: give at least one text")
	}
	total := 0
	for i, toks := range inputs {
		switch {
		case len(toks) == 0:
			return nil, badRequest("input", "input[%d] is empty", i)
		case info.EmbedContextLength > 0 && len(toks) > info.EmbedContextLength:
			e := badRequest("input", "input[%d] is %d tokens, but the embedding context holds %d: shorten it", i, len(toks), info.EmbedContextLength)
			e.code = "context_length_exceeded"
			return nil, e
		}
		if total += len(toks); total > maxEmbedTokens {
			return nil, badRequest("input", "the inputs hold more than %d tokens: send fewer in one request", maxEmbedTokens)
		}
	}
	return inputs, nil
}

// embedError maps an Embed failure: a peer without embeddings is 501, a
// too-long input names "input".
func embedError(err error, s *Server) *apiError {
	if errors.Is(err, infer.ErrUnsupported) {
		return s.errNoEmbeddings()
	}
	e := classify(err, dialectOpenAI)
	if e.param == "messages" || (e.param == "" && e.status == http.StatusBadRequest) {
		e.param = "input"
	}
	return e
}

// base64Floats encodes v as OpenAI's base64 encoding_format does: the
// little-endian bytes of each float32, in order.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
