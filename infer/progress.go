package infer

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// progressBarWidth is the number of cells between the brackets.
const progressBarWidth = 30

// Progress renders a model-loading progress bar:
//
//	loading stories260K  [===============>              ]  53%
//
// On a terminal it redraws one line with \r at each whole percent; on
// anything else (a log file, a pipe) it writes a plain line at every 10%,
// so logs stay readable. Progress is safe for concurrent use.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	tty   bool
	last  int // last percent written, -1 before the first
	done  bool
}

// NewProgress returns a Progress labelled label ("loading stories260K"), writing to w. It draws a
// bar when w is a terminal (an *os.File on a character device).
func NewProgress(w io.Writer, label string) *Progress {
	return &Progress{w: w, label: label, tty: isTerminal(w), last: -1}
}

// NewProgressTTY is NewProgress with the terminal choice made by the caller.
func NewProgressTTY(w io.Writer, label string, tty bool) *Progress {
	return &Progress{w: w, label: label, tty: tty, last: -1}
}

// Update reports progress frac in [0, 1] (values outside are clamped). It
// returns true, so it can serve as a loader callback that may cancel.
func (p *Progress) Update(frac float32) bool {
	if frac != frac || frac < 0 { // NaN or negative
		frac = 0
	}
	pct := min(int(float64(frac)*100+1e-4), 100) // 1e-4: float32(0.53)*100 is 52.99..
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return true
	}
	switch {
	case p.tty && pct != p.last:
		fmt.Fprintf(p.w, "\r%s", p.line(pct))
		p.last = pct
	case !p.tty && (p.last < 0 || pct/10 > p.last/10):
		fmt.Fprintf(p.w, "%s  %3d%%\n", p.label, pct/10*10)
		p.last = pct
	}
	return true
}

// Done finishes the bar at 100% and ends its line. Later Updates are ignored.
func (p *Progress) Done() {
	p.Update(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && p.tty {
		io.WriteString(p.w, "\n")
	}
	p.done = true
}

func (p *Progress) line(pct int) string {
	filled := pct * progressBarWidth / 100
	bar := strings.Repeat("=", filled)
	if filled < progressBarWidth {
		bar += ">" + strings.Repeat(" ", progressBarWidth-filled-1)
	}
	return fmt.Sprintf("%s  [%s] %3d%%", p.label, bar, pct)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
