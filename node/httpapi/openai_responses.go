package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/meshllm/meshllm/infer"
)

// defaultTemperature is the engine's temperature when a request sets none
// (infer.Sampling's documented default), reported as the response's.
const defaultTemperature = 0.8

// responsesRequest is the body of POST /v1/responses: text in (a string,
// or a list of messages), text out. OpenAI fields this server does not
// honour are refused (responsesRefused).
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           responsesInput  `json:"input"`
	Instructions    string          `json:"instructions"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	Stream          bool            `json:"stream"`
	Truncation      string          `json:"truncation"` // "disabled" (the default) or "auto"
	Text            *responsesText  `json:"text"`
	StreamOptions   json.RawMessage `json:"stream_options"`      // include_obfuscation: accepted, nothing is obfuscated
	ParallelTools   *bool           `json:"parallel_tool_calls"` // accepted: no tools are offered
	Store           json.RawMessage `json:"store"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	responsesRefused
	openAIIgnored
	meshllmField
}

// responsesRefused holds the Responses fields that are refused when set.
type responsesRefused struct {
	Tools              json.RawMessage `json:"tools"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         json.RawMessage `json:"background"`
	Include            json.RawMessage `json:"include"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Prompt             json.RawMessage `json:"prompt"`
	TopLogprobs        json.RawMessage `json:"top_logprobs"`
	MaxToolCalls       json.RawMessage `json:"max_tool_calls"`
	ContextManagement  json.RawMessage `json:"context_management"`
	Moderation         json.RawMessage `json:"moderation"`
}

// responsesText is the request's text options: its format.
type responsesText struct {
	Format *struct {
		Type   string          `json:"type"` // "text", "json_object", "json_schema"
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"format"`
	Verbosity json.RawMessage `json:"verbosity"`
}

// responsesInput is a Responses input: a string (one user message) or a
// list of message items.
type responsesInput struct {
	text  string
	items []responsesItem
	set   bool
}

// responsesItem is one input item; only messages are supported.
type responsesItem struct {
	Type    string         `json:"type"` // "message" or absent
	Role    string         `json:"role"`
	Content responsesParts `json:"content"`
}

// responsesParts is a message's content: a string, or input_text /
// output_text parts.
type responsesParts struct {
	text string
}

// UnmarshalJSON accepts a string or an array of text parts.
func (p *responsesParts) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &p.text)
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return &fieldError{field: "input", msg: "a message's content must be a string or an array of content parts"}
	}
	var sb strings.Builder
	for _, part := range parts {
		if (part.Type != "input_text" && part.Type != "output_text" && part.Type != "text") || part.Text == nil {
			return &fieldError{field: "input", msg: fmt.Sprintf("content parts of type %q are not supported: this model reads text only", part.Type)}
		}
		sb.WriteString(*part.Text)
	}
	p.text = sb.String()
	return nil
}

// UnmarshalJSON accepts a string or an array of items.
func (in *responsesInput) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*in = responsesInput{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		in.set = true
		return json.Unmarshal(b, &in.text)
	}
	if err := json.Unmarshal(b, &in.items); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return fe
		}
		return &fieldError{field: "input", msg: "input must be a string or an array of input items"}
	}
	in.set = true
	return nil
}

// responseObject is OpenAI's Response, as Ollama serves it (text output
// only), with meshllm's extras.
type responseObject struct {
	ID                 string              `json:"id"`
	Object             string              `json:"object"`
	CreatedAt          int64               `json:"created_at"`
	CompletedAt        *int64              `json:"completed_at"`
	Status             string              `json:"status"` // in_progress, completed, incomplete, failed
	IncompleteDetails  *responseIncomplete `json:"incomplete_details"`
	Model              string              `json:"model"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Instructions       *string             `json:"instructions"`
	Output             []responseMessage   `json:"output"`
	Error              *responseError      `json:"error"`
	Tools              []json.RawMessage   `json:"tools"`
	ToolChoice         string              `json:"tool_choice"`
	Truncation         string              `json:"truncation"`
	ParallelToolCalls  bool                `json:"parallel_tool_calls"`
	Text               map[string]any      `json:"text"`
	TopP               float64             `json:"top_p"`
	Temperature        float64             `json:"temperature"`
	PresencePenalty    float64             `json:"presence_penalty"`
	FrequencyPenalty   float64             `json:"frequency_penalty"`
	TopLogprobs        int                 `json:"top_logprobs"`
	Reasoning          *struct{}           `json:"reasoning"`
	Usage              *responseUsage      `json:"usage"`
	MaxOutputTokens    *int                `json:"max_output_tokens"`
	MaxToolCalls       *int                `json:"max_tool_calls"`
	Store              bool                `json:"store"`
	Background         bool                `json:"background"`
	ServiceTier        string              `json:"service_tier"`
	Metadata           map[string]string   `json:"metadata"`
	SafetyIdentifier   *string             `json:"safety_identifier"`
	PromptCacheKey     *string             `json:"prompt_cache_key"`
	SystemFingerprint  string              `json:"system_fingerprint,omitempty"` // meshllm's addition, as in chat
	meshExtras
}

type responseIncomplete struct {
	Reason string `json:"reason"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// responseMessage is the output message item.
type responseMessage struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
}

type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// responsesJob is a validated Responses request.
type responsesJob struct {
	*job
	req     *responsesRequest
	id      string // resp_...
	itemID  string // msg_...
	format  map[string]any
	created int64
}

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	var req responsesRequest
	if e := s.decode(w, r, &req); e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	r, e := withForward(r, req.meshllmField) // where the prompt may go: the router reads it
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	rj, e := s.responsesJob(&req, start)
	if e != nil {
		s.writeError(w, dialectOpenAI, e)
		return
	}
	if rj.truncated > 0 {
		w.Header().Set(headerTruncated, strconv.Itoa(rj.truncated))
	}
	if req.Stream {
		s.streamResponse(w, r, rj)
		return
	}
	var text strings.Builder
	res, err := s.run(r.Context(), rj.job, func(t string) error { text.WriteString(t); return nil })
	if err != nil {
		s.writeError(w, dialectOpenAI, classify(err, dialectOpenAI))
		return
	}
	writeJSON(w, http.StatusOK, rj.object(s, res, text.String(), true))
}

// responsesJob validates a Responses request and renders its prompt.
func (s *Server) responsesJob(req *responsesRequest, start time.Time) (*responsesJob, *apiError) {
	if req.Model == "" {
		return nil, missingField("model")
	}
	model, ok := s.resolveModel(req.Model)
	if !ok {
		return nil, modelNotFound(req.Model)
	}
	if e := req.responsesRefused.check(req); e != nil {
		return nil, e
	}
	msgs, e := req.messages()
	if e != nil {
		return nil, e
	}
	info := s.gen.Info()
	sampling, e := s.sampling(samplingParams{Temperature: req.Temperature, TopP: req.TopP,
		MaxTokens: req.MaxOutputTokens, maxTokensName: "max_output_tokens"}, info, maxOpenAITemperature)
	if e != nil {
		return nil, e
	}
	format := map[string]any{"type": "text"}
	if req.Text != nil && req.Text.Format != nil {
		f := req.Text.Format
		switch f.Type {
		case "", "text":
		case "json_object":
			sampling.Constraint = &infer.Constraint{JSONSchema: jsonObjectSchema}
			format = map[string]any{"type": f.Type}
		case "json_schema":
			if len(f.Name) > maxSchemaNameBytes {
				return nil, badRequest("text", "text.format.name has %d bytes, at most %d", len(f.Name), maxSchemaNameBytes)
			}
			if sampling.Constraint, e = schemaConstraint(f.Schema, "text", "text.format.schema"); e != nil {
				return nil, e
			}
			format = map[string]any{"type": f.Type, "name": f.Name, "schema": json.RawMessage(sampling.Constraint.JSONSchema), "strict": f.Strict != nil && *f.Strict}
		default:
			return nil, badRequest("text", "text.format.type %q is not supported: use text, json_object or json_schema", f.Type)
		}
	}
	var tokens []int32
	var ctx, dropped int
	switch req.Truncation {
	case "auto":
		tokens, ctx, dropped, e = s.fitChat(msgs, nil, 0, sampling, dialectOpenAI)
	case "", "disabled":
		// OpenAI's default: a conversation that does not fit fails.
		text, err := s.gen.Render(msgs, nil)
		if err != nil {
			return nil, messagesParam(classify(err, dialectOpenAI))
		}
		tokens, e = s.tokenize(text)
	default:
		return nil, badRequest("truncation", `truncation must be "auto" or "disabled", got %q`, req.Truncation)
	}
	if e != nil {
		e = messagesParam(e)
		if e.param == "messages" {
			e.param = "input"
		}
		return nil, e
	}
	j := &job{api: apiOpenAI, model: model, prompt: tokens, sampling: sampling, start: start, context: ctx, truncated: dropped}
	if e := s.checkPrompt(j, dialectOpenAI); e != nil {
		if e.param == "messages" {
			e.param = "input"
		}
		return nil, e
	}
	return &responsesJob{job: j, req: req, id: s.responsesID("resp"), itemID: s.responsesID("msg"), format: format, created: start.Unix()}, nil
}

// responsesID is an ID in the Responses API's style ("resp_...",
// "msg_...").
func (s *Server) responsesID(prefix string) string {
	return strings.Replace(s.newID(prefix), "-", "_", 1)
}

// check refuses the Responses fields this server does not honour.
func (r *responsesRefused) check(req *responsesRequest) *apiError {
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		why  string
	}{
		{"tools", r.Tools, "tools are not supported in /v1/responses: use /v1/chat/completions for function calling"},
		{"previous_response_id", r.PreviousResponseID, "previous_response_id is not supported: this server stores no responses, send the whole conversation as input"},
		{"conversation", r.Conversation, "conversation is not supported: this server stores no conversations, send the whole conversation as input"},
		{"include", r.Include, "include is not supported"},
		{"reasoning", r.Reasoning, "reasoning is not supported: this server has no reasoning controls"},
		{"prompt", r.Prompt, "prompt templates are not supported: send input and instructions"},
		{"top_logprobs", r.TopLogprobs, "top_logprobs is not supported in /v1/responses: use /v1/chat/completions"},
		{"max_tool_calls", r.MaxToolCalls, "max_tool_calls is not supported: no tools are offered"},
		{"context_management", r.ContextManagement, "context_management is not supported: send truncation \"auto\" to drop the oldest messages"},
		{"moderation", r.Moderation, "moderation is not supported: this server runs no moderation"},
	} {
		if rawGiven(f.raw) && !bytes.Equal(bytes.TrimSpace(f.raw), []byte("0")) {
			return badRequest(f.name, "%s", f.why)
		}
	}
	if rawGiven(r.Background) && !bytes.Equal(bytes.TrimSpace(r.Background), []byte("false")) {
		return badRequest("background", "background responses are not supported: this server stores no responses")
	}
	if rawGiven(req.Store) && !bytes.Equal(bytes.TrimSpace(req.Store), []byte("false")) {
		return badRequest("store", "store=true is not supported: this server stores no responses (send store: false)")
	}
	if rawGiven(req.ToolChoice) {
		var mode string
		if json.Unmarshal(req.ToolChoice, &mode) != nil || (mode != "auto" && mode != "none") {
			return badRequest("tool_choice", `tool_choice must be "auto" or "none": no tools are offered`)
		}
	}
	if req.Text != nil && rawGiven(req.Text.Verbosity) {
		return badRequest("text", "text.verbosity is not supported")
	}
	return nil
}

// messages turns instructions and input into the chat to render.
func (req *responsesRequest) messages() ([]infer.Message, *apiError) {
	var msgs []infer.Message
	if req.Instructions != "" {
		msgs = append(msgs, infer.Message{Role: "system", Content: req.Instructions})
	}
	in := req.Input
	switch {
	case !in.set:
		return nil, missingField("input")
	case in.items == nil:
		if in.text == "" {
			return nil, badRequest("input", "input is empty")
		}
		return append(msgs, infer.Message{Role: "user", Content: in.text}), nil
	case len(in.items) == 0:
		return nil, badRequest("input", "input is empty")
	}
	for i, it := range in.items {
		if it.Type != "" && it.Type != "message" {
			return nil, badRequest("input", "input[%d] of type %q is not supported: only messages are", i, it.Type)
		}
		role := it.Role
		switch role {
		case "user", "system", "assistant":
		case "developer":
			role = "system"
		case "":
			return nil, badRequest("input", "input[%d].role is required", i)
		default:
			return nil, badRequest("input", "input[%d].role %q is not supported: use user, system, developer or assistant", i, it.Role)
		}
		msgs = append(msgs, infer.Message{Role: role, Content: it.Content.text})
	}
	return msgs, nil
}

// object builds the response object; res is nil while in progress.
func (rj *responsesJob) object(s *Server, res *infer.Result, text string, done bool) responseObject {
	req := rj.req
	o := responseObject{
		ID: rj.id, Object: "response", CreatedAt: rj.created, Status: "in_progress", Model: rj.model,
		Output: []responseMessage{}, Tools: []json.RawMessage{}, ToolChoice: "auto", Truncation: "disabled",
		ParallelToolCalls: true, Text: map[string]any{"format": rj.format}, TopP: 1, Temperature: defaultTemperature,
		MaxOutputTokens: req.MaxOutputTokens, ServiceTier: "default", Metadata: map[string]string{},
		SystemFingerprint: s.systemFingerprint(),
	}
	if req.Instructions != "" {
		o.Instructions = &req.Instructions
	}
	if req.Truncation == "auto" {
		o.Truncation = "auto"
	}
	if req.Temperature != nil {
		o.Temperature = *req.Temperature
	}
	if req.TopP != nil && *req.TopP > 0 {
		o.TopP = *req.TopP
	}
	if !done {
		return o
	}
	completed := s.now().Unix()
	o.CompletedAt, o.Status = &completed, "completed"
	if res.FinishReason == infer.FinishLength {
		o.Status, o.IncompleteDetails = "incomplete", &responseIncomplete{Reason: "max_output_tokens"}
	}
	o.Output = []responseMessage{rj.message(text, "completed")}
	u := &responseUsage{InputTokens: res.PromptTokens, OutputTokens: res.GeneratedTokens, TotalTokens: res.PromptTokens + res.GeneratedTokens}
	u.InputTokensDetails.CachedTokens = res.CachedTokens
	o.Usage = u
	o.meshExtras = meshExtras{Timings: openAITimings(res), TruncatedMessages: rj.truncated}
	return o
}

func (rj *responsesJob) message(text, status string) responseMessage {
	m := responseMessage{ID: rj.itemID, Type: "message", Status: status, Role: "assistant", Content: []responsePart{}}
	if status == "completed" || text != "" {
		m.Content = []responsePart{textPart(text)}
	}
	return m
}

func textPart(text string) responsePart {
	return responsePart{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// responseEvents writes a Responses stream: SSE events with an "event:"
// line, each carrying its type and sequence number. It belongs to one
// request's goroutine.
type responseEvents struct {
	sw  *streamWriter
	seq int
}

// send writes one event; fields are the event's data besides type and
// sequence_number.
func (ev *responseEvents) send(typ string, fields map[string]any) error {
	fields["type"], fields["sequence_number"] = typ, ev.seq
	ev.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("encoding a stream event: %w", err)
	}
	sw := ev.sw
	sw.start()
	if _, err = fmt.Fprintf(sw.w, "event: %s\ndata: %s\n\n", typ, b); err == nil {
		err = sw.rc.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errClientGone, err)
	}
	return nil
}

// streamResponse runs rj and streams its events as Ollama (and OpenAI)
// send them: response.created and response.in_progress with the first
// piece (so an error before any piece still gets its status code), the
// message item and its text part, response.output_text.delta per piece,
// then the .done events and response.completed (response.incomplete when
// max_output_tokens cut the reply; response.failed on an error).
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, rj *responsesJob) {
	ev := &responseEvents{sw: newStreamWriter(w, true)}
	var text strings.Builder
	started := false
	begin := func() error {
		if started {
			return nil
		}
		started = true
		o := rj.object(s, nil, "", false)
		for _, typ := range []string{"response.created", "response.in_progress"} {
			if err := ev.send(typ, map[string]any{"response": o}); err != nil {
				return err
			}
		}
		if err := ev.send("response.output_item.added", map[string]any{"output_index": 0, "item": rj.message("", "in_progress")}); err != nil {
			return err
		}
		return ev.send("response.content_part.added", map[string]any{"item_id": rj.itemID, "output_index": 0, "content_index": 0, "part": textPart("")})
	}
	res, err := s.run(r.Context(), rj.job, func(t string) error {
		if err := begin(); err != nil {
			return err
		}
		text.WriteString(t)
		return ev.send("response.output_text.delta", map[string]any{"item_id": rj.itemID, "output_index": 0, "content_index": 0,
			"delta": t, "logprobs": []any{}})
	})
	if err == nil {
		err = begin()
	}
	if err != nil {
		e := classify(err, dialectOpenAI)
		if !ev.sw.started {
			s.writeError(w, dialectOpenAI, e)
			return
		}
		setOutcome(w, e.status)
		if e.status != statusClientClosed {
			o := rj.object(s, nil, "", false)
			o.Status, o.Error = "failed", &responseError{Code: e.code, Message: e.message}
			_ = ev.send("response.failed", map[string]any{"response": o})
		}
		return
	}
	full := text.String()
	final := rj.object(s, res, full, true)
	steps := []struct {
		typ    string
		fields map[string]any
	}{
		{"response.output_text.done", map[string]any{"item_id": rj.itemID, "output_index": 0, "content_index": 0, "text": full, "logprobs": []any{}}},
		{"response.content_part.done", map[string]any{"item_id": rj.itemID, "output_index": 0, "content_index": 0, "part": textPart(full)}},
		{"response.output_item.done", map[string]any{"output_index": 0, "item": rj.message(full, "completed")}},
	}
	last := "response.completed"
	if final.Status == "incomplete" {
		last = "response.incomplete"
	}
	steps = append(steps, struct {
		typ    string
		fields map[string]any
	}{last, map[string]any{"response": final}})
	for _, st := range steps {
		if err := ev.send(st.typ, st.fields); err != nil {
			setOutcome(w, statusClientClosed)
			return
		}
	}
}
