package synth

import (
	"encoding/binary"
	"io"
	"math"
)

func readF32(b []byte, out []float32) error {
	if len(b) < 4*len(out) {
		return io.ErrUnexpectedEOF
	}
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
}

func sqrt(x float64) float64 { return math.Sqrt(max(x, 0)) }
