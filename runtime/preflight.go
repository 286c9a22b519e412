package runtime

import "fmt"

// Structural limits on tool arguments (spec 001 MUST 7), checked before
// anything else looks at them. Upstream schemas may allow more; the gateway
// does not pass model-generated input past these bounds.
const (
	maxArgsDepth  = 32      // nesting of objects and arrays
	maxArgsNodes  = 100_000 // values of every kind, keys included
	maxArgsString = 4 << 20 // bytes of one string (a document fits; guards bound documents further)
	maxArgsKeyLen = 1024    // bytes of one object key
)

// preflight checks the structure of decoded arguments against the limits.
func preflight(args map[string]any) *Error {
	nodes := 0
	var walk func(v any, depth int, path string) *Error
	walk = func(v any, depth int, path string) *Error {
		nodes++
		if nodes > maxArgsNodes {
			return newError(CodeArgsInvalid, "arguments hold more than %d values", maxArgsNodes).withPath("args")
		}
		if depth > maxArgsDepth {
			return newError(CodeArgsInvalid, "arguments nest deeper than %d levels", maxArgsDepth).withPath("args" + path)
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if len(k) > maxArgsKeyLen {
					return newError(CodeArgsInvalid, "an argument key is longer than %d bytes", maxArgsKeyLen).withPath("args" + path)
				}
				nodes++
				if e := walk(c, depth+1, path+"/"+k); e != nil {
					return e
				}
			}
		case []any:
			for i, c := range x {
				if e := walk(c, depth+1, fmt.Sprintf("%s/%d", path, i)); e != nil {
					return e
				}
			}
		case string:
			if len(x) > maxArgsString {
				return newError(CodeArgsInvalid, "a string argument is longer than %d bytes", maxArgsString).withPath("args" + path)
			}
		}
		return nil
	}
	return walk(args, 0, "")
}
