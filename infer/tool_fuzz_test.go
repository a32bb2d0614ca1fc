package infer

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzFormats = []ToolFormat{ToolFormatHermes, ToolFormatQwenXML, ToolFormatGLM, ToolFormatLlama3,
	ToolFormatMistral, ToolFormatMistralArgs, ToolFormatGeneric, ""}

// FuzzToolParse checks the parser and the stream splitter on any model
// output: no panic; a stream split anywhere gives what Parse gives; calls
// have unique IDs, names and object arguments; content never grows; and
// output without calls is the text unchanged (but for a generic JSON
// reply, which is decoded).
func FuzzToolParse(f *testing.F) {
	for _, c := range parseCases {
		for i, ff := range fuzzFormats {
			if ff == c.format {
				f.Add(uint8(i), c.text, uint64(len(c.text)))
			}
		}
	}
	f.Add(uint8(0), "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{\\\"b\\\": [1, {\\\"c\\\": null}]}\"}\n</tool_call>\n<tool_c", uint64(7))
	f.Add(uint8(6), `{"response": "\ud83d\ude00\u00"}`, uint64(3))
	f.Fuzz(func(t *testing.T, fi uint8, text string, seed uint64) {
		format := fuzzFormats[int(fi)%len(fuzzFormats)]
		content, calls := format.Parse(text, parseTools)
		checkCalls(t, calls)
		if len(content) > len(text) {
			t.Fatalf("content grew: %d > %d bytes", len(content), len(text))
		}
		generic := format == ToolFormatGeneric && strings.HasPrefix(strings.TrimLeft(text, spaces), "{")
		if len(calls) == 0 && !generic && content != text {
			t.Fatalf("no calls, but content %q != text %q", content, text)
		}
		if utf8.ValidString(text) && !utf8.ValidString(content) {
			t.Fatalf("content is not UTF-8: %q", content)
		}

		// Split at random points (the seed decides), then feed.
		r := rand.New(rand.NewPCG(seed, seed>>7))
		var pieces []string
		for rest := text; rest != ""; {
			n := 1 + r.IntN(len(rest))
			if r.IntN(3) == 0 {
				n = min(len(rest), 1+r.IntN(3))
			}
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		streamed, closed, scalls := streamParse(format, pieces)
		if streamed+closed != content || !equalCalls(callsOf(scalls), callsOf(calls)) {
			t.Fatalf("split %q: stream gave %q+%q %v, Parse %q %v", pieces, streamed, closed, callsOf(scalls), content, callsOf(calls))
		}
		for _, c := range calls {
			if !json.Valid(c.Arguments) {
				t.Fatalf("invalid arguments %q", c.Arguments)
			}
		}
	})
}
