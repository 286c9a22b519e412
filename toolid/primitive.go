package toolid

import (
	"strconv"
	"strings"
)

// Kind is the kind of an MCP primitive. Tools are implied and never written
// in an id; resources and prompts carry a "kind::" prefix (§9.1), so the three
// id spaces are disjoint by construction.
type Kind string

// The primitive kinds.
const (
	KindTool     Kind = "tool"
	KindResource Kind = "resource"
	KindPrompt   Kind = "prompt"
)

const kindSep = "::"

// FormatPrimitive prefixes a canonical id with its kind (nothing for tools).
func FormatPrimitive(kind Kind, id ID) string {
	if kind == KindTool || kind == "" {
		return id.String()
	}
	return string(kind) + kindSep + id.String()
}

// ParsePrimitive parses "[kind::]tool_id". The body obeys the §1.1 grammar
// exactly. A ~N collision suffix is not part of the grammar and is rejected.
func ParsePrimitive(s string) (Kind, ID, error) {
	kind := KindTool
	body := s
	if i := strings.Index(s, kindSep); i >= 0 {
		switch Kind(s[:i]) {
		case KindResource, KindPrompt:
			kind = Kind(s[:i])
			body = s[i+len(kindSep):]
		default:
			return "", ID{}, &SyntaxError{Input: s, Part: "kind", Reason: "unknown kind before '::'"}
		}
	}
	id, err := Parse(body)
	if err != nil {
		return "", ID{}, err
	}
	return kind, id, nil
}

// ForResource derives a resource's id (§9.2): namespace as for tools (the
// server's, or else the uri scheme, or else "mcp"), the resource name fitted
// to the name grammar, and the hash of its uri.
func ForResource(namespace, name, uri string) ID {
	if namespace == "" {
		namespace = schemeNamespace(uri)
	}
	if name == "" {
		name = lastSegment(uri)
	}
	n, _ := Name(name)
	return ID{Namespace: namespace, Name: n, Hash: ResourceHash8(uri)}
}

// ForPrompt derives a prompt's id (§9.2): namespace as for tools (the
// server's, or else inferred from the prompt name), and the hash of the name
// and its sorted argument names.
func ForPrompt(namespace, name string, argNames []string) ID {
	id := ID{Namespace: namespace, Hash: PromptHash8(name, argNames)}
	if namespace == "" {
		id.Namespace, id.Name = Infer(name)
	} else {
		id.Name, _ = Name(name)
	}
	return id
}

func schemeNamespace(uri string) string {
	if i := strings.Index(uri, ":"); i > 0 {
		if ns := Namespace(uri[:i]); ns != "" {
			return ns
		}
	}
	return FallbackNamespace
}

func lastSegment(uri string) string {
	s := strings.TrimRight(uri, "/")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Disambiguate applies the §9.3 collision policy: the first occurrence of an
// id keeps it, later occurrences (in the given order) become id~2, id~3, ...
// The suffixed forms are opaque catalog keys, not canonical ids. A suffixed
// key never collides with another input id, because '~' is outside the
// grammar.
func Disambiguate(ids []string) []string {
	out := make([]string, len(ids))
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		n := seen[id] + 1
		seen[id] = n
		if n == 1 {
			out[i] = id
		} else {
			out[i] = id + "~" + strconv.Itoa(n)
		}
	}
	return out
}
