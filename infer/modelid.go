package infer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Model identity sampling: how much of the tensor data ModelID reads.
const (
	modelIDSamples     = 64       // chunks of tensor data hashed
	modelIDChunk       = 64 << 10 // bytes per chunk
	modelIDMaxHeader   = 256 << 20
	modelIDVersionSalt = "meshllm-model-id-v1"
)

// ModelID returns the identity of the GGUF model at path: a 64-digit hex
// string that differs when the weights or the tokenizer differ, and is equal
// for byte-identical files wherever they are stored.
//
// It is SHA-256 over: a version salt, the file size, the whole GGUF header
// (all metadata, so the tokenizer's tokens, scores, merges and the chat
// template, plus every tensor's name, shape, type and offset) and 64
// chunks of 64 KiB spread evenly over the tensor data, the last chunk ending
// at the end of the file. It reads a few MiB however large the file, so it
// takes milliseconds for a multi-GB model.
//
// Two files that differ only in weights outside the sampled chunks get the
// same ID. Real models never do (fine-tunes and quantizations change every
// tensor); the ID only seeds cache digests, so a collision could at worst
// make one peer's cache estimate of another wrong, never a reply.
//
// The same bytes stored in an Ollama store and as a plain file get the same
// ID, which is why the blob's own sha256 name is not used: it would split one
// model into two identities between peers that load it in different ways.
func ModelID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := fi.Size()
	g, err := ReadGGUF(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	header := g.DataOffset
	if header > size || header > modelIDMaxHeader {
		return "", fmt.Errorf("%s: truncated GGUF file (header %d bytes, file %d)", path, header, size)
	}
	h := sha256.New()
	io.WriteString(h, modelIDVersionSalt)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, header)); err != nil {
		return "", err
	}
	for _, off := range sampleOffsets(header, size, modelIDSamples, modelIDChunk) {
		if _, err := io.Copy(h, io.NewSectionReader(f, off, modelIDChunk)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sampleOffsets returns up to k offsets of chunk-byte windows spread evenly
// over [start, end), the first at start and the last ending at end. When the
// range is shorter than k chunks it is covered whole.
func sampleOffsets(start, end int64, k int, chunk int64) []int64 {
	span := end - start
	if span <= 0 {
		return nil
	}
	if span <= int64(k)*chunk {
		var offs []int64
		for off := start; off < end; off += chunk {
			offs = append(offs, off)
		}
		return offs
	}
	offs := make([]int64, k)
	last := end - chunk
	for i := range k {
		offs[i] = start + (last-start)*int64(i)/int64(k-1)
	}
	return offs
}
