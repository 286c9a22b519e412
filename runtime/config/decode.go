package config

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// defaulter is a configuration type whose zero value is not its default:
// the decoder calls defaults on every new value of it (a list item, a
// pointer it allocates) before it decodes the file's keys onto it.
type defaulter interface{ defaults() }

// decoder decodes a schema-valid tree value onto a Go value by the json
// tags of its fields, leaving every key the file does not set at the value
// it already holds (the defaults). A value that cannot be decoded (a
// duration too large for a time.Duration, a size that is not a whole
// number of bytes) is reported at its JSON pointer and decoding goes on,
// so that the earliest problem of the whole file can be reported.
type decoder struct {
	fail func(ptr, format string, args ...any)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decode decodes v (map[string]any, []any, string, json.Number, bool or
// nil) onto dst, which must be settable. Empty lists and maps decode to
// nil, as Config documents.
func (d *decoder) decode(ptr string, v any, dst reflect.Value) {
	if v == nil {
		switch dst.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			dst.SetZero()
		}
		return
	}
	if pt := reflect.PointerTo(dst.Type()); dst.Kind() != reflect.Pointer && dst.Kind() != reflect.Interface {
		switch {
		case pt.Implements(jsonUnmarshaler):
			b, err := json.Marshal(v)
			if err == nil {
				err = dst.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b)
			}
			if err != nil {
				d.fail(ptr, "%v", err)
			}
			return
		case pt.Implements(textUnmarshaler):
			s, ok := v.(string)
			if !ok {
				d.mismatch(ptr, v, dst)
				return
			}
			if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
				d.fail(ptr, "%v", err)
			}
			return
		}
	}
	switch dst.Kind() {
	case reflect.Interface:
		dst.Set(reflect.ValueOf(v))
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(newValue(dst.Type().Elem()))
		}
		d.decode(ptr, v, dst.Elem())
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			d.mismatch(ptr, v, dst)
			return
		}
		fields := jsonFields(dst.Type())
		for k, fv := range m {
			if i, ok := fields[k]; ok {
				d.decode(ptr+"/"+jsonpointer.Escape(k), fv, dst.Field(i))
			}
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			d.mismatch(ptr, v, dst)
			return
		}
		if len(items) == 0 {
			dst.SetZero()
			return
		}
		s := reflect.MakeSlice(dst.Type(), len(items), len(items))
		for i, it := range items {
			s.Index(i).Set(newValue(dst.Type().Elem()).Elem())
			d.decode(ptr+"/"+strconv.Itoa(i), it, s.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || dst.Type().Key().Kind() != reflect.String {
			d.mismatch(ptr, v, dst)
			return
		}
		if len(m) == 0 {
			dst.SetZero()
			return
		}
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for k, mv := range m {
			e := newValue(dst.Type().Elem()).Elem()
			d.decode(ptr+"/"+jsonpointer.Escape(k), mv, e)
			out.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), e)
		}
		dst.Set(out)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			d.mismatch(ptr, v, dst)
			return
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.mismatch(ptr, v, dst)
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			d.mismatch(ptr, v, dst)
			return
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || dst.OverflowInt(i) {
			d.fail(ptr, "is not an integer in range")
			return
		}
		dst.SetInt(i)
	default:
		d.mismatch(ptr, v, dst)
	}
}

// mismatch reports a value of a type its Go field cannot hold: a
// disagreement between the schema and the Go types, not a user error the
// schema would have let through.
func (d *decoder) mismatch(ptr string, v any, dst reflect.Value) {
	d.fail(ptr, "cannot decode %T into %s", v, dst.Type())
}

// newValue returns a pointer to a new value of t with its defaults.
func newValue(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if df, ok := p.Interface().(defaulter); ok {
		df.defaults()
	}
	return p
}

// jsonFields maps the json names of t's fields to their indexes.
func jsonFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = i
	}
	return out
}
