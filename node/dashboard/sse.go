package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// subscriberBuffer is how many events a page may fall behind before it is
// disconnected: at one event a second, eight seconds of a stalled reader.
const subscriberBuffer = 8

// subscriber is one connected page. ch is closed (under Dashboard.mu)
// when the dashboard drops the page or stops.
type subscriber struct {
	ch chan []byte
}

// serveEvents streams the dashboard as server-sent events: a "snapshot"
// event at once, then a "tick" event per interval, until the client goes
// away, falls too far behind, or Run stops. A stream beyond MaxClients is
// refused with 503 and Retry-After.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	sub, first, err := d.subscribe()
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer d.unsubscribe(sub)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // reverse proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// retry: how long a browser waits before reconnecting a dropped stream.
	if _, err := fmt.Fprintf(w, "retry: 2000\n\n"); err != nil {
		return
	}
	if writeSSE(w, rc, "snapshot", first.Seq, sseMarshal(first)) != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-sub.ch:
			if !ok {
				return
			}
			if writeSSE(w, rc, "tick", 0, b) != nil {
				return
			}
		}
	}
}

// writeSSE writes one event and flushes it. id 0 is left out (a tick's
// seq is in its data).
func writeSSE(w http.ResponseWriter, rc *http.ResponseController, event string, id uint64, data []byte) error {
	head := "event: " + event + "\n"
	if id > 0 {
		head += "id: " + strconv.FormatUint(id, 10) + "\n"
	}
	// data holds no newline: encoding/json escapes them in strings.
	if _, err := fmt.Fprintf(w, "%sdata: %s\n\n", head, data); err != nil {
		return err
	}
	return rc.Flush()
}

func sseMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// subscribe registers a page and returns the snapshot it starts from,
// atomically, so that the page misses no tick and sees none twice.
func (d *Dashboard) subscribe() (*subscriber, Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, Event{}, fmt.Errorf("the dashboard has stopped")
	}
	if len(d.subs) >= d.cfg.MaxClients {
		return nil, Event{}, fmt.Errorf("too many dashboard pages open (%d); close one and retry", d.cfg.MaxClients)
	}
	sub := &subscriber{ch: make(chan []byte, subscriberBuffer)}
	d.subs[sub] = struct{}{}
	return sub, d.snapshotLocked(), nil
}

// unsubscribe forgets a page that went away.
func (d *Dashboard) unsubscribe(sub *subscriber) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.subs[sub]; ok {
		d.dropLocked(sub)
	}
}

// dropLocked forgets a page and ends its stream; d.mu is held.
func (d *Dashboard) dropLocked(sub *subscriber) {
	delete(d.subs, sub)
	close(sub.ch)
}

// closeAll ends every stream and refuses new ones (Run has stopped).
func (d *Dashboard) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for sub := range d.subs {
		d.dropLocked(sub)
	}
}
