package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// streamWriter writes one streamed response: SSE events (OpenAI) or NDJSON
// lines (Ollama). Headers go out with the first event, so an error found
// before anything was generated can still get its proper status code.
// A streamWriter belongs to one handler goroutine.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	started bool
}

func newStreamWriter(w http.ResponseWriter, sse bool) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), sse: sse}
}

// start sends the 200 and the streaming headers once.
func (sw *streamWriter) start() {
	if sw.started {
		return
	}
	sw.started = true
	h := sw.w.Header()
	if sw.sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering
	sw.w.WriteHeader(http.StatusOK)
}

// send writes v as one event or line and flushes it. A failed write means
// the client is gone.
func (sw *streamWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding a stream event: %w", err)
	}
	return sw.sendRaw(b)
}

func (sw *streamWriter) sendRaw(b []byte) error {
	sw.start()
	var err error
	if sw.sse {
		_, err = fmt.Fprintf(sw.w, "data: %s\n\n", b)
	} else {
		b = append(b, '\n')
		_, err = sw.w.Write(b)
	}
	if err == nil {
		err = sw.rc.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", errClientGone, err)
	}
	return nil
}

// done ends an SSE stream the way OpenAI does.
func (sw *streamWriter) done() error {
	return sw.sendRaw([]byte("[DONE]"))
}
