package p2p

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// sampleExtRequest uses every v2 field.
func sampleExtRequest() *InferRequest {
	r := sampleRequest()
	r.Sampling.PresencePenalty = 0.5
	r.Sampling.FrequencyPenalty = -1.25
	r.Sampling.Logprobs = true
	r.Sampling.TopLogprobs = 5
	r.Sampling.Constraint = &Constraint{
		JSONSchema: `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`,
		Prefix:     "```json\n", Suffix: "\n```",
	}
	return r
}

// samplePiece carries logprobs, one with alternatives.
func samplePiece() InferPiece {
	return InferPiece{Text: " time", Tokens: 2, Logprobs: []TokenLogprob{
		{Token: " ti", Logprob: -0.25, Top: []TopLogprob{{Token: " ti", Logprob: -0.25}, {Token: " day", Logprob: -2.5}}},
		{Token: "me", Logprob: -9999},
	}}
}

func TestWireVersionFollowsFields(t *testing.T) {
	if b := sampleRequest().AppendBinary(nil, testNow); b[0] != wireVersion {
		t.Fatalf("a request without v2 fields encodes as version %d, want %d (old peers must serve it)", b[0], wireVersion)
	}
	for name, mut := range map[string]func(s *Sampling){
		"presence":     func(s *Sampling) { s.PresencePenalty = 0.1 },
		"frequency":    func(s *Sampling) { s.FrequencyPenalty = -0.1 },
		"constraint":   func(s *Sampling) { s.Constraint = &Constraint{JSONSchema: `{}`} },
		"logprobs":     func(s *Sampling) { s.Logprobs = true },
		"top_logprobs": func(s *Sampling) { s.TopLogprobs = 1 },
	} {
		r := sampleRequest()
		mut(&r.Sampling)
		b := r.AppendBinary(nil, testNow)
		if b[0] != wireVersionExt {
			t.Errorf("%s: version %d, want %d", name, b[0], wireVersionExt)
		}
		// What a v1-only peer runs on it: the strict version check.
		old := decoder{b: b}
		old.version("infer request")
		if !errors.Is(old.err, ErrFrameMalformed) {
			t.Errorf("%s: a v1-only decoder accepts it: %v", name, old.err)
		}
		got, err := DecodeInferRequest(b, testNow)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got.Deadline, r.Deadline = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got.Sampling, r.Sampling)
		}
	}
	if b := (&InferPiece{Text: "x", Tokens: 1}).AppendBinary(nil); b[0] != wireVersion {
		t.Fatalf("a piece without logprobs encodes as version %d", b[0])
	}
	if b := samplePiece(); b.AppendBinary(nil)[0] != wireVersionExt {
		t.Fatal("a piece with logprobs is not v2")
	}
}

func TestExtRequestRoundTripAndTruncation(t *testing.T) {
	req := sampleExtRequest()
	full := req.AppendBinary(nil, testNow)
	got, err := DecodeInferRequest(full, testNow)
	if err != nil {
		t.Fatal(err)
	}
	got.Deadline, req.Deadline = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, req) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.Sampling, req.Sampling)
	}
	for n := 0; n < len(full); n++ {
		if _, err := DecodeInferRequest(full[:n], testNow); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(full))
		}
	}
	pc := samplePiece()
	pb := pc.AppendBinary(nil)
	for n := 0; n < len(pb); n++ {
		if _, err := DecodeInferPiece(pb[:n]); err == nil {
			t.Fatalf("piece prefix of %d/%d bytes decoded", n, len(pb))
		}
	}
}

// TestExtDecoderLimits builds payloads by hand that break each v2 limit.
func TestExtDecoderLimits(t *testing.T) {
	v1 := sampleRequest().AppendBinary(nil, testNow)[1:] // v1 fields without the version
	ext := func(f func(b []byte) []byte) []byte {
		return f(append([]byte{wireVersionExt}, v1...))
	}
	head := func(b []byte, flags, top uint64) []byte {
		b = appendF32(b, 0)
		b = appendF32(b, 0)
		b = appendUvarint(b, flags)
		return appendUvarint(b, top)
	}
	piece := func(tokens uint64, f func(b []byte) []byte) []byte {
		b := appendString([]byte{wireVersionExt}, "t")
		return f(appendUvarint(b, tokens))
	}
	entry := func(b []byte, tok string, lp float32, top int) []byte {
		b = appendString(b, tok)
		b = appendF32(b, lp)
		b = appendUvarint(b, uint64(top))
		for i := 0; i < top; i++ {
			b = appendString(b, "a")
			b = appendF32(b, -1)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"version 3":         append([]byte{3}, v1...),
		"missing extension": ext(func(b []byte) []byte { return b }),
		"unknown flag":      ext(func(b []byte) []byte { return head(b, 4, 0) }),
		"top_logprobs 21":   ext(func(b []byte) []byte { return head(b, extLogprobs, MaxTopLogprobs+1) }),
		"NaN penalty":       ext(func(b []byte) []byte { return appendF32(b, math.Float32frombits(0x7fc00000)) }),
		"schema over limit": ext(func(b []byte) []byte {
			return appendString(head(b, extConstraint, 0), strings.Repeat("{", MaxSchemaLen+1))
		}),
		"prefix over limit": ext(func(b []byte) []byte {
			return appendString(appendString(head(b, extConstraint, 0), "{}"), strings.Repeat("p", MaxAffixLen+1))
		}),
		"constraint cut": ext(func(b []byte) []byte { return appendString(head(b, extConstraint, 0), "{}") }),
	} {
		if _, err := DecodeInferRequest(b, testNow); !errors.Is(err, ErrFrameMalformed) {
			t.Errorf("request, %s: got %v, want ErrFrameMalformed", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"version 3":           {3, 0, 0},
		"more lps than toks":  piece(1, func(b []byte) []byte { return entry(entry(appendUvarint(b, 2), "a", -1, 0), "b", -1, 0) }),
		"v2 piece, no lps":    piece(1, func(b []byte) []byte { return appendUvarint(b, 0) }),
		"21 alternatives":     piece(1, func(b []byte) []byte { return entry(appendUvarint(b, 1), "a", -1, MaxTopLogprobs+1) }),
		"positive logprob":    piece(1, func(b []byte) []byte { return entry(appendUvarint(b, 1), "a", 0.5, 0) }),
		"logprob below -9999": piece(1, func(b []byte) []byte { return entry(appendUvarint(b, 1), "a", -1e5, 0) }),
		"long token text": piece(1, func(b []byte) []byte {
			return entry(appendUvarint(b, 1), strings.Repeat("x", MaxLogprobTokenLen+1), -1, 0)
		}),
		"count beyond bytes": piece(5000, func(b []byte) []byte { return appendUvarint(b, MaxPieceLogprobs) }),
		"count over limit":   piece(5000, func(b []byte) []byte { return appendUvarint(b, MaxPieceLogprobs+1) }),
	} {
		if _, err := DecodeInferPiece(b); !errors.Is(err, ErrFrameMalformed) {
			t.Errorf("piece, %s: got %v, want ErrFrameMalformed", name, err)
		}
	}
}

func TestExtValidate(t *testing.T) {
	if err := sampleExtRequest().validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(s *Sampling){
		"top_logprobs":  func(s *Sampling) { s.TopLogprobs = MaxTopLogprobs + 1 },
		"schema":        func(s *Sampling) { s.Constraint.JSONSchema = strings.Repeat(" ", MaxSchemaLen+1) },
		"suffix":        func(s *Sampling) { s.Constraint.Suffix = strings.Repeat("s", MaxAffixLen+1) },
		"NaN frequency": func(s *Sampling) { s.FrequencyPenalty = math.Float32frombits(0x7fc00000) },
	} {
		r := sampleExtRequest()
		mut(&r.Sampling)
		if err := r.validate(); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
		}
	}
}

func TestEncoderCutsWhatDecodersReject(t *testing.T) {
	pc := InferPiece{Text: "x", Tokens: 1, Logprobs: []TokenLogprob{
		{Token: strings.Repeat("y", 300), Logprob: 0.5, Top: make([]TopLogprob, 30)},
		{Token: "extra", Logprob: -1}, // more entries than Tokens
	}}
	got, err := DecodeInferPiece(pc.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Logprobs) != 1 || len(got.Logprobs[0].Token) != MaxLogprobTokenLen || got.Logprobs[0].Logprob != 0 ||
		len(got.Logprobs[0].Top) != MaxTopLogprobs {
		t.Fatalf("not cut to the limits: %d entries, %+v", len(got.Logprobs), got.Logprobs[0])
	}
}

// bigPiece has n logprob entries with MaxTopLogprobs alternatives each.
func bigPiece(n int) InferPiece {
	p := InferPiece{Text: "a long piece", Tokens: n, Logprobs: make([]TokenLogprob, n)}
	for i := range p.Logprobs {
		top := make([]TopLogprob, MaxTopLogprobs)
		for j := range top {
			top[j] = TopLogprob{Token: fmt.Sprintf("alt%03d-%02d", i%1000, j), Logprob: -float32(j)}
		}
		p.Logprobs[i] = TokenLogprob{Token: fmt.Sprintf("tok%04d", i), Logprob: -float32(i%7) / 8, Top: top}
	}
	return p
}

func TestPieceSplit(t *testing.T) {
	if parts := samplePiece().split(1 << 20); len(parts) != 1 || !reflect.DeepEqual(parts[0], samplePiece()) {
		t.Fatalf("a small piece was split: %+v", parts)
	}
	p := bigPiece(3000)
	const maxPayload = 64 << 10
	parts := p.split(maxPayload)
	if len(parts) < 2 {
		t.Fatalf("a %d-byte piece was not split", len(p.AppendBinary(nil)))
	}
	var tokens int
	var text string
	var lps []TokenLogprob
	for i, pt := range parts {
		b := pt.AppendBinary(nil)
		if len(b) > maxPayload {
			t.Fatalf("part %d is %d bytes, limit %d", i, len(b), maxPayload)
		}
		got, err := DecodeInferPiece(b)
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if len(got.Logprobs) != got.Tokens || len(got.Logprobs) > MaxPieceLogprobs {
			t.Fatalf("part %d: %d logprobs for %d tokens", i, len(got.Logprobs), got.Tokens)
		}
		if i > 0 && got.Text != "" {
			t.Fatalf("part %d repeats text", i)
		}
		tokens += got.Tokens
		text += got.Text
		lps = append(lps, got.Logprobs...)
	}
	if tokens != p.Tokens || text != p.Text || !reflect.DeepEqual(lps, p.Logprobs) {
		t.Fatalf("parts add up to %d tokens, %q, %d logprobs", tokens, text, len(lps))
	}
}

// TestInferStreamCarriesLogprobs sends a v2 request and a piece with more
// logprobs than one frame holds through a real stream.
func TestInferStreamCarriesLogprobs(t *testing.T) {
	hs := mockHosts(t, 2)
	big := bigPiece(1500)
	var seen *InferRequest
	handler := func(ctx context.Context, from peer.ID, req *InferRequest, send func(InferPiece) error) (*InferFinal, error) {
		seen = req
		if err := send(big); err != nil {
			return nil, err
		}
		return &InferFinal{GeneratedTokens: big.Tokens, FinishReason: "stop"}, nil
	}
	const maxFrame = 128 << 10
	client, _ := inferPair(t, hs, handler, InferServiceOptions{MaxFrame: maxFrame}, InferClientOptions{MaxFrame: maxFrame})
	req := sampleExtRequest()
	req.Hops = 0
	var frames, tokens int
	var lps []TokenLogprob
	_, err := client.Infer(context.Background(), hs[1].ID(), req, func(p InferPiece) error {
		frames++
		tokens += p.Tokens
		lps = append(lps, p.Logprobs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen.Sampling, req.Sampling) {
		t.Fatalf("server saw sampling %+v, want %+v", seen.Sampling, req.Sampling)
	}
	if frames < 2 || tokens != big.Tokens || !reflect.DeepEqual(lps, big.Logprobs) {
		t.Fatalf("%d frames, %d tokens, %d logprobs; want several frames adding up to %d", frames, tokens, len(lps), big.Tokens)
	}
}
