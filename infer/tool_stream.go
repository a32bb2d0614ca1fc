package infer

import "strings"

// ToolStream splits a reply, fed as it streams, into content and tool
// calls. Write passes plain content through as it comes and holds back
// from the point where a tool-call marker may begin (a partial marker, and
// white space that may turn out to precede one, are held until the text
// after them decides); Close parses what was held and returns the rest of
// the content and the calls. So a stream can show content early and end
// with tool calls, and never shows a marker that turns into a call.
//
// Malformed output (an unterminated marker, invalid JSON, arguments that
// are not an object, held text beyond MaxToolCallsBytes) is content. The
// result does not depend on how the reply is split into pieces: Parse is
// one Write and Close. For ToolFormatGeneric, the text of a reply
// {"response": "..."} streams as it is decoded; any other JSON reply is
// held to the end.
//
// A ToolStream is used by one goroutine at a time.
type ToolStream struct {
	format    ToolFormat
	tools     []Tool
	marker    string // the marker a call starts with, for formats that have one
	state     streamState
	ws        strings.Builder // stScan, stStart: held white space
	partial   string          // stScan, stStart: held text that may begin a marker, after ws
	gap       string          // white space dropped before the tool region
	region    strings.Builder
	undecided bool   // generic: the region may still turn out to be {"response": ...}
	esc       string // stResponse: an incomplete escape sequence
	out       strings.Builder
}

type streamState int

const (
	stScan     streamState = iota // looking for a marker anywhere
	stStart                       // before the first non-space (the call is the whole reply)
	stRegion                      // holding the tool calls
	stPass                        // all content
	stResponse                    // generic: decoding the "response" string
	stTail                        // generic: after the response string (dropped)
	stClosed
)

const (
	markerTagged  = "<tool_call>"
	markerMistral = "[TOOL_CALLS]"
	pythonTag     = "<|python_tag|>"
	spaces        = " \t\r\n"
)

// NewStream returns a splitter for a reply in format f to a request that
// offered tools (used to check names and type arguments; may be nil). An
// unknown format passes everything through as content.
func (f ToolFormat) NewStream(tools []Tool) *ToolStream {
	s := &ToolStream{format: f, tools: tools}
	switch f {
	case ToolFormatHermes, ToolFormatQwenXML, ToolFormatGLM:
		s.marker = markerTagged
	case ToolFormatMistral, ToolFormatMistralArgs:
		s.marker = markerMistral
	case ToolFormatLlama3, ToolFormatGeneric:
		s.state = stStart
	default:
		s.state = stPass
	}
	return s
}

// Parse splits a complete reply in format f into its content and tool
// calls (see ToolStream). Each call gets a fresh ID; its arguments are a
// JSON object.
func (f ToolFormat) Parse(text string, tools []Tool) (string, []ToolCall) {
	s := f.NewStream(tools)
	content := s.Write(text)
	rest, calls := s.Close()
	return content + rest, calls
}

// Write feeds the next piece of the reply and returns the content that can
// be shown now (often all of text, sometimes ""). After Close it returns
// text unchanged.
func (s *ToolStream) Write(text string) string {
	switch s.state {
	case stPass, stClosed:
		return text
	case stScan:
		s.scan(text)
	case stStart:
		s.start(text)
	case stRegion:
		s.addRegion(text)
	case stResponse:
		s.decode(text)
	case stTail:
	}
	out := s.out.String()
	s.out.Reset()
	return out
}

// Close ends the reply: it returns the content not yet returned and the
// tool calls.
func (s *ToolStream) Close() (string, []ToolCall) {
	var calls []ToolCall
	switch s.state {
	case stScan, stStart:
		s.out.WriteString(s.ws.String())
		s.out.WriteString(s.partial)
	case stRegion:
		var content string
		var lead bool
		content, calls, lead = parseRegion(s.format, s.region.String(), s.tools)
		if lead {
			s.out.WriteString(s.gap)
		}
		s.out.WriteString(content)
	case stResponse:
		s.out.WriteString(s.esc)
	}
	s.state = stClosed
	for i := range calls {
		calls[i].ID = newToolCallID()
	}
	out := s.out.String()
	s.out.Reset()
	return out, calls
}

// scan looks for the marker, emitting what cannot be part of one. What
// is held is white space (s.ws), then a proper prefix of the marker
// (s.partial), so a piece costs its length, however long the held white
// space is.
func (s *ToolStream) scan(text string) {
	q := s.partial + text
	if i := strings.Index(q, s.marker); i >= 0 {
		before := q[:i]
		keep := len(strings.TrimRight(before, spaces))
		if keep > 0 {
			s.flushWS()
		}
		s.out.WriteString(before[:keep])
		s.gap = s.ws.String() + before[keep:]
		s.ws.Reset()
		s.partial = ""
		s.enterRegion(q[i:])
		return
	}
	hold := len(q) - partialSuffix(q, s.marker)
	keep := len(strings.TrimRight(q[:hold], spaces))
	if keep > 0 {
		s.flushWS()
		s.out.WriteString(q[:keep])
	}
	s.ws.WriteString(q[keep:hold])
	s.partial = q[hold:]
}

// flushWS emits the held white space as content.
func (s *ToolStream) flushWS() {
	s.out.WriteString(s.ws.String())
	s.ws.Reset()
}

// partialSuffix is the length of the longest suffix of p that is a proper
// prefix of marker.
func partialSuffix(p, marker string) int {
	for n := min(len(marker)-1, len(p)); n > 0; n-- {
		if strings.HasSuffix(p, marker[:n]) {
			return n
		}
	}
	return 0
}

// start decides, at the reply's first non-space, whether it is a call.
func (s *ToolStream) start(text string) {
	if s.partial == "" {
		t := strings.TrimLeft(text, spaces)
		s.ws.WriteString(text[:len(text)-len(t)])
		text = t
	}
	t := s.partial + text
	switch {
	case t == "":
	case t[0] == '{' || s.format == ToolFormatLlama3 && strings.HasPrefix(t, pythonTag):
		s.gap, s.partial = s.ws.String(), ""
		s.ws.Reset()
		s.enterRegion(t)
	case s.format == ToolFormatLlama3 && strings.HasPrefix(pythonTag, t):
		s.partial = t
	default:
		s.flushWS()
		s.out.WriteString(t)
		s.partial, s.state = "", stPass
	}
}

func (s *ToolStream) enterRegion(text string) {
	s.state = stRegion
	s.undecided = s.format == ToolFormatGeneric
	s.addRegion(text)
}

// maxResponsePrefix bounds where a generic reply's {"response": " may end.
const maxResponsePrefix = 256

// addRegion holds text as tool calls, up to MaxToolCallsBytes.
func (s *ToolStream) addRegion(text string) {
	s.region.WriteString(text)
	if s.undecided {
		// A JSON reply that is not {"response": ...} is held to the end.
		r := s.region.String()
		n, decided, ok := matchResponsePrefix(r[:min(len(r), maxResponsePrefix)])
		switch {
		case ok:
			s.region.Reset()
			s.state, s.undecided = stResponse, false
			s.decode(r[n:])
			return
		case decided || len(r) >= maxResponsePrefix:
			s.undecided = false
		}
	}
	if s.region.Len() > MaxToolCallsBytes {
		s.out.WriteString(s.gap)
		s.out.WriteString(s.region.String())
		s.region.Reset()
		s.state = stPass
	}
}

// matchResponsePrefix matches `{ "response" : "` (with any white space)
// at the start of r: n is the length matched when ok; decided is false
// while r may still grow into a match.
func matchResponsePrefix(r string) (n int, decided, ok bool) {
	i := 0
	skip := func() {
		for i < len(r) && strings.IndexByte(spaces, r[i]) >= 0 {
			i++
		}
	}
	for _, part := range []string{"{", `"response"`, ":", `"`} {
		skip()
		for j := 0; j < len(part); j++ {
			if i == len(r) {
				return 0, false, false
			}
			if r[i] != part[j] {
				return 0, true, false
			}
			i++
		}
	}
	return i, true, true
}

// decode emits the decoded text of the generic reply's response string,
// up to its closing quote (an incomplete escape is held; an invalid one is
// shown as written).
func (s *ToolStream) decode(text string) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if s.esc == "" {
			switch c {
			case '"':
				s.state = stTail
				return
			case '\\':
				s.esc = `\`
			default:
				s.out.WriteByte(c)
			}
			continue
		}
		s.esc += string(c)
		for s.esc != "" {
			out, used, more := decodeEscape(s.esc)
			if more {
				break
			}
			s.out.WriteString(out)
			rest := s.esc[used:]
			s.esc = ""
			if rest != "" { // not part of the escape: decode it again
				s.decode(rest)
				if s.state != stResponse {
					return
				}
			}
		}
	}
}
