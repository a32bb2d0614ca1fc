package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxJSONDepth bounds the nesting of tool schemas and arguments (the
// templates and the grammar builder recurse over them).
const maxJSONDepth = 64

// jsonNode is a decoded JSON value that keeps its objects' key order (a
// schema's property order is the order a grammar asks for them in, and the
// order a template prints them in).
type jsonNode struct {
	kind  byte        // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys  []string    // object keys, in order
	vals  []*jsonNode // object values or array items
	str   string      // string value, number literal, "true"/"false"
	isInt bool        // number without fraction or exponent
}

var errJSONDepth = fmt.Errorf("nested deeper than %d levels", maxJSONDepth)

// parseJSON decodes one JSON value (and nothing after it but white space).
func parseJSON(data []byte) (*jsonNode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := decodeNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return n, nil
}

func decodeNode(dec *json.Decoder, depth int) (*jsonNode, error) {
	if depth > maxJSONDepth {
		return nil, errJSONDepth
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &jsonNode{kind: 'o'}
			seen := make(map[string]bool)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				v, err := decodeNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if seen[k] { // the last value wins, as in encoding/json
					for i := range n.keys {
						if n.keys[i] == k {
							n.vals[i] = v
						}
					}
					continue
				}
				seen[k] = true
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &jsonNode{kind: 'a'}
			for dec.More() {
				v, err := decodeNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &jsonNode{kind: 's', str: t}, nil
	case json.Number:
		s := string(t)
		return &jsonNode{kind: 'n', str: s, isInt: !strings.ContainsAny(s, ".eE")}, nil
	case bool:
		if t {
			return &jsonNode{kind: 'b', str: "true"}, nil
		}
		return &jsonNode{kind: 'b', str: "false"}, nil
	case nil:
		return &jsonNode{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// get returns an object's value for key (nil if absent or not an object).
func (n *jsonNode) get(key string) *jsonNode {
	if n == nil || n.kind != 'o' {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// set sets an object's key, appending it when new.
func (n *jsonNode) set(key string, v *jsonNode) {
	for i, k := range n.keys {
		if k == key {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
}

// del removes an object's key.
func (n *jsonNode) del(key string) {
	for i, k := range n.keys {
		if k == key {
			n.keys = append(n.keys[:i:i], n.keys[i+1:]...)
			n.vals = append(n.vals[:i:i], n.vals[i+1:]...)
			return
		}
	}
}

func jsonString(s string) *jsonNode { return &jsonNode{kind: 's', str: s} }

func jsonObject(kv ...any) *jsonNode {
	n := &jsonNode{kind: 'o'}
	for i := 0; i+1 < len(kv); i += 2 {
		n.set(kv[i].(string), kv[i+1].(*jsonNode))
	}
	return n
}

// encode writes n as compact JSON (Go's escaping, without HTML escapes).
func (n *jsonNode) encode(b *bytes.Buffer) {
	switch n.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			n.vals[i].encode(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, v := range n.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			v.encode(b)
		}
		b.WriteByte(']')
	case 's':
		writeJSONString(b, n.str)
	case 'n', 'b':
		b.WriteString(n.str)
	default:
		b.WriteString("null")
	}
}

func (n *jsonNode) bytes() []byte {
	var b bytes.Buffer
	n.encode(&b)
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// value converts n to a template value.
func (n *jsonNode) value() jinja.Value {
	switch n.kind {
	case 'o':
		d := jinja.NewDict()
		for i, k := range n.keys {
			d.AsDict().Set(k, n.vals[i].value())
		}
		return d
	case 'a':
		items := make([]jinja.Value, len(n.vals))
		for i, v := range n.vals {
			items[i] = v.value()
		}
		return jinja.NewList(items)
	case 's':
		return jinja.NewString(n.str)
	case 'n':
		return jinja.FromGoValue(json.Number(n.str))
	case 'b':
		return jinja.NewBool(n.str == "true")
	}
	return jinja.None()
}

// argumentsObject normalises a tool call's arguments: a JSON object, or a
// string holding one ("" and null mean no arguments). It returns the
// decoded object.
func argumentsObject(raw []byte) (*jsonNode, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return &jsonNode{kind: 'o'}, nil
	}
	n, err := parseJSON(raw)
	if err != nil {
		return nil, err
	}
	if n.kind == 's' {
		if strings.TrimSpace(n.str) == "" {
			return &jsonNode{kind: 'o'}, nil
		}
		if n, err = parseJSON([]byte(n.str)); err != nil {
			return nil, fmt.Errorf("string arguments: %v", err)
		}
	}
	switch n.kind {
	case 'o':
		return n, nil
	case 'z':
		return &jsonNode{kind: 'o'}, nil
	}
	return nil, errors.New("arguments are not a JSON object")
}
