package benchmarks

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// object writes a JSON object with keys in insertion order; floats are
// rounded to 4 decimals.
type object struct {
	b bytes.Buffer
	n int
}

func (o *object) put(k string, v any) {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.n++
	kb, _ := json.Marshal(k)
	o.b.Write(kb)
	o.b.WriteByte(':')
	switch x := v.(type) {
	case float64:
		o.b.WriteString(strconv.FormatFloat(round(x, 4), 'f', -1, 64))
	default:
		vb, err := json.Marshal(x)
		if err != nil {
			vb = []byte("null")
		}
		o.b.Write(vb)
	}
}

func (o *object) bytes() []byte {
	if o.n == 0 {
		return []byte("{}")
	}
	return append(o.b.Bytes(), '}')
}
