package p2p

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var testNow = time.Unix(1_800_000_000, 123456789)

func sampleRequest() *InferRequest {
	return &InferRequest{
		ModelID: "stories260K-3f2a",
		Prompt:  []int32{1, 0, 127, 128, 32000, 1 << 30},
		Sampling: Sampling{
			Temperature: 0.7, TopP: 0.95, TopK: 40, MinP: 0.05, RepeatPenalty: 1.1,
			RepeatLastN: -1, Seed: -42, MaxTokens: 256, Stop: []string{"\n\n", "</s>"},
		},
		Deadline:        testNow.Add(2500 * time.Millisecond),
		Hops:            1,
		EstimatedCached: 96,
	}
}

func TestInferRequestRoundTrip(t *testing.T) {
	for _, req := range []*InferRequest{sampleRequest(), {ModelID: "m"}, {Deadline: testNow.Add(-time.Second)}} {
		b := req.AppendBinary(nil, testNow)
		got, err := DecodeInferRequest(b, testNow)
		if err != nil {
			t.Fatal(err)
		}
		want := *req
		if want.Deadline.Before(testNow) && !want.Deadline.IsZero() {
			want.Deadline = testNow // an expired deadline arrives expired
		}
		if !got.Deadline.Equal(want.Deadline) {
			t.Fatalf("deadline %v, want %v", got.Deadline, want.Deadline)
		}
		got.Deadline, want.Deadline = time.Time{}, time.Time{}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
		}
	}
}

// The deadline travels as time left, so a receiver whose clock is an hour
// off still gets the same budget.
func TestInferRequestDeadlineIsRelative(t *testing.T) {
	req := sampleRequest()
	b := req.AppendBinary(nil, testNow)
	skewed := testNow.Add(time.Hour)
	got, err := DecodeInferRequest(b, skewed)
	if err != nil {
		t.Fatal(err)
	}
	if left := got.Deadline.Sub(skewed); left != 2500*time.Millisecond {
		t.Fatalf("time left %v, want 2.5s", left)
	}
}

func TestRepliesRoundTrip(t *testing.T) {
	for _, pc := range []InferPiece{{Text: "Once upon a time", Tokens: 4}, samplePiece()} {
		gotPc, err := DecodeInferPiece(pc.AppendBinary(nil))
		if err != nil || !reflect.DeepEqual(gotPc, pc) {
			t.Fatalf("piece: %+v %v", gotPc, err)
		}
	}
	fin := &InferFinal{PromptTokens: 700, CachedTokens: 512, GeneratedTokens: 8, QueueWait: 3 * time.Millisecond,
		Prefill: 40 * time.Millisecond, Decode: 90 * time.Millisecond, TimeToFirst: 45 * time.Millisecond,
		FinishReason: "length", Elapsed: 140 * time.Millisecond}
	gotFin, err := DecodeInferFinal(fin.AppendBinary(nil))
	if err != nil || *gotFin != *fin {
		t.Fatalf("final: %+v %v", gotFin, err)
	}
	ie := &InferError{Code: ErrBusy, Message: "queue full", RetryAfter: 1500 * time.Millisecond}
	gotIe, err := DecodeInferError(ie.AppendBinary(nil))
	if err != nil || *gotIe != *ie {
		t.Fatalf("error: %+v %v", gotIe, err)
	}
}

func TestLoadRoundTrip(t *testing.T) {
	id := mkPeerID(t, 1)
	l := &Load{Peer: id, Epoch: 1_700_000_000_000_000_000, Seq: 77, At: testNow, QueueDepth: 3, Active: 2,
		Slots: 4, PushBack: true, PrefillTokPerSec: 1234.5, DecodeTokPerSec: 56.25}
	b, _ := l.MarshalBinary()
	got, err := DecodeLoad(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(l.At) {
		t.Fatalf("At %v, want %v", got.At, l.At)
	}
	got.At = l.At
	if *got != *l {
		t.Fatalf("got %+v\nwant %+v", *got, *l)
	}
	if len(b) > 100 {
		t.Fatalf("a load announcement takes %d bytes; expected under 100", len(b))
	}
}

func TestDecodersRejectTruncation(t *testing.T) {
	full := sampleRequest().AppendBinary(nil, testNow)
	// Every strict prefix that cuts a field must fail; none may panic.
	for n := 0; n < len(full); n++ {
		if _, err := DecodeInferRequest(full[:n], testNow); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(full))
		}
	}
	l := &Load{Peer: mkPeerID(t, 2), Seq: 1}
	lb := l.AppendBinary(nil)
	for n := 0; n < len(lb); n++ {
		if _, err := DecodeLoad(lb[:n]); err == nil {
			t.Fatalf("load prefix of %d/%d bytes decoded", n, len(lb))
		}
	}
}

func TestDecodersRejectGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"wrong version", []byte{2, 0}},
		{"prompt count beyond bytes", []byte{1, 0, 0xff, 0xff, 0x03}},
		{"token above int32", append([]byte{1, 0, 1}, 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"non-minimal varint", []byte{1, 0x80, 0x00}},
	} {
		if _, err := DecodeInferRequest(tc.b, testNow); !errors.Is(err, ErrFrameMalformed) {
			t.Errorf("%s: got %v, want ErrFrameMalformed", tc.name, err)
		}
	}
	if _, err := DecodeInferError([]byte{1, 0, 0, 0}); err == nil {
		t.Error("error code 0 decoded")
	}
	if _, err := DecodeLoad([]byte("md\x01")); err == nil {
		t.Error("a digest's magic decoded as a load")
	}
	bad := (&Load{Peer: "not a multihash", Seq: 1}).AppendBinary(nil)
	if _, err := DecodeLoad(bad); err == nil {
		t.Error("load with an invalid peer ID decoded")
	}
}

func TestInferErrorMatching(t *testing.T) {
	var err error = &InferError{Code: ErrBusy, Message: "queue full", RetryAfter: time.Second}
	if !errors.Is(err, ErrBusy) || errors.Is(err, ErrInternal) {
		t.Fatal("errors.Is does not match by code")
	}
	var ie *InferError
	if !errors.As(err, &ie) || ie.RetryAfter != time.Second {
		t.Fatal("errors.As lost the retry hint")
	}
	if got := err.Error(); got != "p2p: busy: queue full" {
		t.Fatalf("message %q", got)
	}
	if s := ErrorCode(99).Error(); s != "error code 99" {
		t.Fatalf("unknown code prints %q", s)
	}
}

func TestRequestValidate(t *testing.T) {
	req := sampleRequest()
	req.Hops = 0
	if err := req.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(r *InferRequest){
		"negative token": func(r *InferRequest) { r.Prompt[0] = -1 },
		"long model":     func(r *InferRequest) { r.ModelID = string(make([]byte, MaxModelIDLen+1)) },
		"many stops":     func(r *InferRequest) { r.Sampling.Stop = make([]string, MaxStopStrings+1) },
		"topk overflow":  func(r *InferRequest) { r.Sampling.TopK = 1 << 40 },
	} {
		r := sampleRequest()
		mut(r)
		if err := r.validate(); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
		}
	}
}

func FuzzDecodeInferRequest(f *testing.F) {
	f.Add(sampleRequest().AppendBinary(nil, testNow))
	f.Add(sampleExtRequest().AppendBinary(nil, testNow))
	f.Add((&InferRequest{Sampling: Sampling{Logprobs: true}}).AppendBinary(nil, testNow))
	f.Add((&InferRequest{}).AppendBinary(nil, testNow))
	f.Add([]byte{1, 0, 0xff, 0xff, 0x03})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeInferRequest(b, testNow)
		if err != nil {
			return
		}
		r2, err := DecodeInferRequest(r.AppendBinary(nil, testNow), testNow)
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if !r.Deadline.Equal(r2.Deadline) {
			t.Fatalf("deadline changed: %v -> %v", r.Deadline, r2.Deadline)
		}
		r.Deadline, r2.Deadline = time.Time{}, time.Time{}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", r, r2)
		}
	})
}

// FuzzDecodeReply covers the server's payloads: the first byte picks the
// decoder (piece, final, error, load).
func FuzzDecodeReply(f *testing.F) {
	f.Add(append([]byte{0}, (&InferPiece{Text: "hi", Tokens: 1}).AppendBinary(nil)...))
	lp := samplePiece()
	f.Add(append([]byte{0}, lp.AppendBinary(nil)...))
	f.Add(append([]byte{1}, (&InferFinal{PromptTokens: 5, FinishReason: "stop"}).AppendBinary(nil)...))
	f.Add(append([]byte{2}, (&InferError{Code: ErrBusy, RetryAfter: time.Second}).AppendBinary(nil)...))
	f.Add(append([]byte{3}, (&Load{Peer: "\x00\x04abcd", Seq: 3, PrefillTokPerSec: 10}).AppendBinary(nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		sel, p := b[0]%4, b[1:]
		switch sel {
		case 0:
			pc, err := DecodeInferPiece(p)
			if err == nil {
				if pc2, err := DecodeInferPiece(pc.AppendBinary(nil)); err != nil || !reflect.DeepEqual(pc2, pc) {
					t.Fatalf("piece round trip: %+v %+v %v", pc, pc2, err)
				}
			}
		case 1:
			fin, err := DecodeInferFinal(p)
			if err == nil {
				if fin2, err := DecodeInferFinal(fin.AppendBinary(nil)); err != nil || *fin2 != *fin {
					t.Fatalf("final round trip: %+v %+v %v", fin, fin2, err)
				}
			}
		case 2:
			ie, err := DecodeInferError(p)
			if err == nil {
				if ie2, err := DecodeInferError(ie.AppendBinary(nil)); err != nil || *ie2 != *ie {
					t.Fatalf("error round trip: %+v %+v %v", ie, ie2, err)
				}
			}
		case 3:
			l, err := DecodeLoad(p)
			if err == nil {
				l2, err := DecodeLoad(l.AppendBinary(nil))
				if err != nil || !l2.At.Equal(l.At) {
					t.Fatalf("load round trip: %+v %+v %v", l, l2, err)
				}
				l2.At = l.At
				if *l2 != *l {
					t.Fatalf("load round trip: %+v %+v", l, l2)
				}
			}
		}
	})
}

func BenchmarkInferRequestCodec(b *testing.B) {
	req := sampleRequest()
	req.Prompt = make([]int32, 2000)
	for i := range req.Prompt {
		req.Prompt[i] = int32(i * 37 % 32000)
	}
	buf := req.AppendBinary(nil, testNow)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = req.AppendBinary(buf[:0], testNow)
		if _, err := DecodeInferRequest(buf, testNow); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf))/2000, "bytes/token")
}
