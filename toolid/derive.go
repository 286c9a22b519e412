package toolid

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// FallbackNamespace is the namespace of a tool whose name carries no
// recognisable prefix and whose server is unknown (§1.4).
const FallbackNamespace = "mcp"

// Shape is the identity-defining part of an input schema (§1.3): its
// top-level property names and its required list. Types and descriptions are
// deliberately not part of it, so prose edits do not churn ids.
type Shape struct {
	Properties []string
	Required   []string
}

// ShapeOf extracts the Shape of a decoded JSON Schema. Malformed parts
// (properties that are not an object, required entries that are not strings)
// contribute nothing rather than failing: identity must exist for every
// upstream tool, and schema problems are reported by catalog validation.
func ShapeOf(schema map[string]any) Shape {
	var s Shape
	if props, ok := schema["properties"].(map[string]any); ok {
		s.Properties = make([]string, 0, len(props))
		for k := range props {
			s.Properties = append(s.Properties, k)
		}
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if str, ok := r.(string); ok {
				s.Required = append(s.Required, str)
			}
		}
	}
	return s
}

// Hash8 returns the first 8 hex digits of sha256(upstreamName + "\n" +
// canonical shape), exactly as §1.3 computes it, including Python's
// json.dumps escaping (ensure_ascii) so ids agree across implementations.
func Hash8(upstreamName string, shape Shape) string {
	props := sortedCopy(shape.Properties)
	req := sortedCopy(shape.Required)
	var b strings.Builder
	b.WriteString(upstreamName)
	b.WriteString("\n{\"properties\":")
	writeJSONStringArray(&b, props)
	b.WriteString(",\"required\":")
	writeJSONStringArray(&b, req)
	b.WriteByte('}')
	return hash8(b.String())
}

// ResourceHash8 is the §9.2 shape hash of a resource: its canonical uri,
// with the kind as domain prefix.
func ResourceHash8(uri string) string { return hash8("resource\n" + uri) }

// PromptHash8 is the §9.2 shape hash of a prompt: its name and its sorted
// argument names, with the kind as domain prefix.
func PromptHash8(name string, argNames []string) string {
	var b strings.Builder
	b.WriteString("prompt\n")
	b.WriteString(name)
	b.WriteByte('\n')
	writeJSONStringArray(&b, sortedCopy(argNames))
	return hash8(b.String())
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out) // byte order of UTF-8 equals code point order, as Python sorts
	return out
}

// writeJSONStringArray writes ss as compact JSON the way Python's json.dumps
// does with its defaults: non-ASCII escaped as \uXXXX (surrogate pairs above
// the BMP), lower-case hex, and '<', '>', '&' left alone.
func writeJSONStringArray(b *strings.Builder, ss []string) {
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		writePyJSONString(b, s)
	}
	b.WriteByte(']')
}

const hexDigits = "0123456789abcdef"

func writePyJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r -= 0x10000
				writeU(b, 0xd800+(r>>10))
				writeU(b, 0xdc00+(r&0x3ff))
			} else {
				writeU(b, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[(r>>12)&0xf])
	b.WriteByte(hexDigits[(r>>8)&0xf])
	b.WriteByte(hexDigits[(r>>4)&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// Namespace fits an upstream server name to the namespace grammar: lower
// case, every run of other characters becomes '-', leading and trailing
// separators are trimmed, a leading digit gets the prefix "ns-", and the
// result is capped at 64 characters. It returns "" when nothing of s
// survives (for example a name written only in CJK characters); callers then
// pick a fallback. Distinct servers can fit to the same namespace; the
// catalog detects and disambiguates that.
func Namespace(s string) string {
	var b strings.Builder
	sep := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUpper(c) {
			c += 'a' - 'A'
		}
		if isLower(c) || isDigit(c) || c == '_' {
			if sep && b.Len() > 0 {
				b.WriteByte('-')
			}
			sep = false
			b.WriteByte(c)
			continue
		}
		sep = true // '-', '.', ' ', any other byte, including UTF-8 continuation bytes
	}
	ns := strings.Trim(b.String(), "_-")
	if ns == "" {
		return ""
	}
	if !isLower(ns[0]) {
		ns = "ns-" + ns
	}
	if len(ns) > maxNamespace {
		ns = strings.TrimRight(ns[:maxNamespace], "_-")
	}
	return ns
}

// Name fits an upstream tool name to the name grammar. A valid name is
// returned verbatim with mapped false. Otherwise every run of characters
// outside [A-Za-z0-9_.-] becomes one '_', the result is trimmed of '_' at
// both ends, prefixed with '_' if it does not start with a letter, capped at
// 128 characters, and "tool" stands in when nothing survives. The mapping is
// deterministic; hash8 still covers the original name, so two names that map
// alike keep distinct ids.
func Name(s string) (name string, mapped bool) {
	if ValidName(s) {
		return s, false
	}
	var b strings.Builder
	sep := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isNameChar(c) {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteByte(c)
			continue
		}
		sep = true
	}
	n := strings.Trim(b.String(), "_")
	if n == "" {
		return "tool", true
	}
	if !isNameStart(n[0]) {
		n = "_" + n
	}
	if len(n) > maxName {
		n = n[:maxName]
	}
	return n, true
}

// Infer splits an upstream tool name into namespace and name when the server
// is unknown (§1.2, §1.4). A '.' or '/' separator splits the name and the
// prefix becomes the namespace; an underscore name of three or more segments
// takes its first segment as namespace and keeps the whole name; anything
// else falls back to the "mcp" namespace with the name verbatim. Names are
// fitted to the grammar with Name.
func Infer(upstreamName string) (namespace, name string) {
	if i := strings.IndexAny(upstreamName, "./"); i > 0 && i < len(upstreamName)-1 {
		if ns := Namespace(upstreamName[:i]); ns != "" {
			n, _ := Name(upstreamName[i+1:])
			return ns, n
		}
	}
	if parts := strings.Split(upstreamName, "_"); len(parts) >= 3 && parts[0] != "" {
		if ns := Namespace(parts[0]); ns != "" {
			n, _ := Name(upstreamName)
			return ns, n
		}
	}
	n, _ := Name(upstreamName)
	return FallbackNamespace, n
}

// ForTool derives a tool's id. namespace is the namespace of the upstream
// server when it is known (see Namespace), or "" to infer it from the name
// (Infer). A valid declared version replaces the hash (§1.2); an invalid one
// is ignored and the hash is kept.
func ForTool(namespace, upstreamName, version string, shape Shape) ID {
	var id ID
	if namespace != "" {
		id.Namespace = namespace
		id.Name, _ = Name(upstreamName)
	} else {
		id.Namespace, id.Name = Infer(upstreamName)
	}
	if version != "" && ValidVersion(version) {
		id.Version = version
	} else {
		id.Hash = Hash8(upstreamName, shape)
	}
	return id
}
