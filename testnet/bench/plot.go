package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line of a chart.
type Series struct {
	Name string
	X, Y []float64
}

// Chart is a line chart drawn with the standard library's image package
// (no plotting dependency): axes with tick labels, one coloured line with
// markers per series, and a legend.
type Chart struct {
	Title, XLabel, YLabel string
	// LogX plots x on a log10 scale (x must be > 0).
	LogX   bool
	Series []Series
}

var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

const (
	chartW, chartH         = 900, 560
	padL, padR, padT, padB = 70, 190, 40, 50
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
)

// WritePNG draws the chart as a PNG.
func (c Chart) WritePNG(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	tx := func(x float64) float64 {
		if c.LogX {
			return math.Log10(math.Max(x, 1e-9))
		}
		return x
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			x0, x1 = math.Min(x0, tx(s.X[i])), math.Max(x1, tx(s.X[i]))
			y0, y1 = math.Min(y0, s.Y[i]), math.Max(y1, s.Y[i])
		}
	}
	if math.IsInf(x0, 0) {
		x0, x1, y1 = 0, 1, 1
	}
	if x1 == x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	y1 *= 1.05
	px := func(x float64) int { return padL + int((tx(x)-x0)/(x1-x0)*float64(plotW)) }
	py := func(y float64) int { return padT + plotH - int((y-y0)/(y1-y0)*float64(plotH)) }
	grey, black := color.RGBA{220, 220, 220, 255}, color.RGBA{0, 0, 0, 255}
	// Grid and ticks.
	for i := 0; i <= 5; i++ {
		y := y0 + (y1-y0)*float64(i)/5
		line(img, padL, py(y), padL+plotW, py(y), grey)
		text(img, 4, py(y)+4, fmt.Sprintf("%.3g", y), black)
	}
	if c.LogX {
		for e := math.Floor(x0); e <= x1; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if lv := math.Log10(v); lv < x0-1e-9 || lv > x1+1e-9 {
					continue
				}
				line(img, px(v), padT, px(v), padT+plotH, grey)
				text(img, px(v)-10, padT+plotH+16, fmt.Sprintf("%g", v), black)
			}
		}
	} else {
		for i := 0; i <= 5; i++ {
			v := x0 + (x1-x0)*float64(i)/5
			line(img, px(v), padT, px(v), padT+plotH, grey)
			text(img, px(v)-10, padT+plotH+16, fmt.Sprintf("%.3g", v), black)
		}
	}
	line(img, padL, padT+plotH, padL+plotW, padT+plotH, black)
	line(img, padL, padT, padL, padT+plotH, black)
	text(img, padL, 20, c.Title, black)
	text(img, padL+plotW/2-len(c.XLabel)*3, chartH-10, c.XLabel, black)
	text(img, 4, padT-10, c.YLabel, black)
	for k, s := range c.Series {
		col := palette[k%len(palette)]
		for i := range s.X {
			x, y := px(s.X[i]), py(s.Y[i])
			if i > 0 {
				thick(img, px(s.X[i-1]), py(s.Y[i-1]), x, y, col)
			}
			fill(img, x-2, y-2, x+3, y+3, col)
		}
		ly := padT + 10 + 18*k
		fill(img, padL+plotW+12, ly-6, padL+plotW+28, ly-2, col)
		text(img, padL+plotW+34, ly, s.Name, black)
	}
	return png.Encode(w, img)
}

func text(img draw.Image, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// line draws a one-pixel line (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	line(img, x0, y0, x1, y1, c)
	line(img, x0, y0+1, x1, y1+1, c)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
