package infer

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t with Python's strftime directives (the C locale), for
// templates' strftime_now ("%d %b %Y" in Llama 3's). Unknown directives are
// kept as written.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	pad := func(n, width int) {
		s := strconv.Itoa(n)
		for range width - len(s) {
			b.WriteByte('0')
		}
		b.WriteString(s)
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			pad(t.Year(), 4)
		case 'y':
			pad(t.Year()%100, 2)
		case 'm':
			pad(int(t.Month()), 2)
		case 'd':
			pad(t.Day(), 2)
		case 'e':
			b.WriteString(strconv.Itoa(t.Day()))
		case 'j':
			pad(t.YearDay(), 3)
		case 'H':
			pad(t.Hour(), 2)
		case 'I':
			pad((t.Hour()+11)%12+1, 2)
		case 'M':
			pad(t.Minute(), 2)
		case 'S':
			pad(t.Second(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
