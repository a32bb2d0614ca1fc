package infer

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestProgressTTY(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressTTY(&b, "loading stories260K", true)
	for _, f := range []float32{0, 0.001, 0.53, 0.535, 1.7} {
		if !p.Update(f) {
			t.Fatal("Update returned false")
		}
	}
	p.Done()
	p.Update(0.2) // ignored after Done
	want := "\rloading stories260K  [>                             ]   0%" +
		"\rloading stories260K  [===============>              ]  53%" +
		"\rloading stories260K  [==============================] 100%\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

func TestProgressPlain(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "loading m") // a bytes.Buffer is no terminal
	for i := 0; i <= 100; i++ {
		p.Update(float32(i) / 100)
	}
	p.Update(float32(math.NaN()))
	p.Done()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 11 || lines[0] != "loading m    0%" || lines[5] != "loading m   50%" || lines[10] != "loading m  100%" {
		t.Errorf("plain output:\n%s", b.String())
	}
	if strings.Contains(b.String(), "\r") {
		t.Error("carriage return in plain output")
	}
}

func TestProgressConcurrent(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressTTY(&b, "loading m", true)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				p.Update(float32(i*4+g) / 400)
			}
		})
	}
	wg.Wait()
	p.Done()
	if !strings.HasSuffix(b.String(), "100%\n") {
		t.Errorf("tail: %q", b.String()[max(0, b.Len()-20):])
	}
}
