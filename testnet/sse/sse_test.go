package sse

import (
	"errors"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		texts    string
		prompt   int
		err      string
	}{
		{"whole", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n: comment\ndata:{\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":7}}\n\ndata: [DONE]\n\n", "ab", 7, ""},
		{"cut", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "a", 0, "without [DONE]"},
		{"garbage", "data: {nope\n\n", "", 0, "bad chunk"},
		{"error event", "data: {\"error\":{\"message\":\"busy\"}}\n\n", "", 0, "stream error: busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var texts string
			prompt := 0
			err := Read(strings.NewReader(tc.in), func(c Chunk) error {
				for _, ch := range c.Choices {
					texts += ch.Text
				}
				if c.Usage != nil {
					prompt = c.Usage.PromptTokens
				}
				return nil
			})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if texts != tc.texts || prompt != tc.prompt {
				t.Fatalf("texts %q prompt %d", texts, prompt)
			}
		})
	}
	stop := errors.New("stop")
	if err := Read(strings.NewReader("data: {}\n\ndata: [DONE]\n\n"), func(Chunk) error { return stop }); err != stop {
		t.Fatalf("onChunk's error: %v", err)
	}
}
