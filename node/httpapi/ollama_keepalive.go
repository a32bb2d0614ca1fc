package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// defaultKeepAlive is how long Ollama keeps a model loaded after a request
// that sets no keep_alive (its OLLAMA_KEEP_ALIVE default).
const defaultKeepAlive = 5 * time.Minute

// keepForever is the keep_alive of a negative value: never unload.
const keepForever = time.Duration(math.MaxInt64)

// keepAlive is Ollama's keep_alive: a duration string ("5m", "1h30m", "0"),
// or a number of seconds; negative means forever, 0 means unload as soon
// as the model is idle. Other JSON types and unparsable strings are
// refused.
type keepAlive struct {
	d time.Duration
}

// UnmarshalJSON reads a keep_alive value.
func (k *keepAlive) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	bad := &fieldError{field: "keep_alive",
		msg: `keep_alive must be a duration ("5m", "1h30m", "0", "-1" for forever) or a number of seconds, got ` + string(b)}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad
		}
		s = strings.TrimSpace(s)
		if d, err := time.ParseDuration(s); err == nil {
			k.d = keepFor(d)
			return nil
		}
		// A bare number in a string ("300", "-1") is seconds.
		if f, err := strconv.ParseFloat(s, 64); err == nil && finite(f) {
			k.d = keepSeconds(f)
			return nil
		}
		return bad
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || !finite(f) {
		return bad
	}
	k.d = keepSeconds(f)
	return nil
}

// keepSeconds converts seconds to a keep_alive, saturating at forever.
func keepSeconds(f float64) time.Duration {
	if f < 0 || f*float64(time.Second) >= float64(math.MaxInt64) {
		return keepForever
	}
	return time.Duration(f * float64(time.Second))
}

func keepFor(d time.Duration) time.Duration {
	if d < 0 {
		return keepForever
	}
	return d
}

// keepAliveOf returns a request's keep_alive as run wants it (nil: unset).
func keepAliveOf(k *keepAlive) *time.Duration {
	if k == nil {
		return nil
	}
	d := k.d
	return &d
}

// unloads reports whether a request asks for the model to be unloaded now
// (keep_alive 0).
func unloads(k *keepAlive) bool { return k != nil && k.d == 0 }

// keepAliveState is when the loaded model would be unloaded, the way
// Ollama's scheduler decides it: keep_alive after the last request ended.
// The one model a peer serves is never really unloaded; /api/ps reports
// this time as expires_at. The zero value is ready (no request ended yet:
// the default from now). A keepAliveState is safe for concurrent use.
type keepAliveState struct {
	mu      sync.Mutex
	set     bool
	expires time.Time
}

// touch records a request that ended at now with keep_alive d (nil: the
// default).
func (k *keepAliveState) touch(now time.Time, d *time.Duration) {
	keep := defaultKeepAlive
	if d != nil {
		keep = *d
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.set, k.expires = true, now.Add(keep)
}

// expiresAt is when the model would be unloaded, seen at now.
func (k *keepAliveState) expiresAt(now time.Time) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.set {
		return now.Add(defaultKeepAlive)
	}
	return k.expires
}
