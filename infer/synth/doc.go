// Package synth writes synthetic GGUF models: a real model's architecture
// and shape (layers, widths, heads, KV heads, FFN, vocabulary) with random
// weights, so that llama.cpp loads them and spends exactly the real model's
// compute on prefill and decode. Benchmarks and experiments use them where
// a trained model would be too big to ship; they are written at run time
// (`meshllm model synth`), never committed.
//
// The files carry complete architecture metadata and a SentencePiece-style
// vocabulary of the real size (<unk>, <s>, </s>, the 256 byte tokens
// <0x00>..<0xFF>, then generated pieces and the chat template's control
// tokens), modelled on stories260K.gguf, which llama.cpp's own CI loads.
// Their text output is noise.
//
// Concurrency: Shape and Options are plain values; Write uses only its
// arguments, so concurrent Writes to different writers are safe.
package synth
