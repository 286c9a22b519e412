// Package toolid implements the stable identifiers of spec 003: the tool_id
// grammar (§1.1), its parse/format round trip (§1.6), namespace and name
// derivation (§1.2, §1.4), the input-schema shape hash (§1.3), the
// resource/prompt primitive ids (§9.1, §9.2) and the deterministic ~N
// collision suffixes (§9.3).
//
// A tool_id is the sole correlation key between browse, hydrate and execute,
// so everything here is deterministic and independent of process state.
package toolid

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest tool_id the grammar admits (§1.1).
const MaxLen = 240

// Component limits of the §1.1 grammar.
const (
	maxNamespace = 64
	maxName      = 128
	maxVersion   = 32
	hashLen      = 8
)

// ErrInvalid is matched (with errors.Is) by every error this package returns
// for input that does not follow the grammar.
var ErrInvalid = errors.New("invalid tool_id")

// SyntaxError reports why a string is not a valid tool_id.
type SyntaxError struct {
	Input  string // the rejected input, possibly long; callers shorten it for display
	Part   string // "namespace", "name", "version", "hash8", "kind" or "id"
	Reason string
}

func (e *SyntaxError) Error() string {
	in := e.Input
	if len(in) > 80 {
		in = in[:80] + "..."
	}
	return fmt.Sprintf("invalid tool_id %q: %s: %s", in, e.Part, e.Reason)
}

// Is makes every SyntaxError match ErrInvalid.
func (e *SyntaxError) Is(target error) bool { return target == ErrInvalid }

// ID is a parsed tool_id: namespace ":" name ["@" version] ["#" hash8].
type ID struct {
	Namespace string
	Name      string
	Version   string // empty when the upstream declared none
	Hash      string // hash8; empty when absent
}

// String formats id without validating it; use Format to validate.
func (id ID) String() string {
	var b strings.Builder
	b.Grow(len(id.Namespace) + len(id.Name) + len(id.Version) + len(id.Hash) + 3)
	b.WriteString(id.Namespace)
	b.WriteByte(':')
	b.WriteString(id.Name)
	if id.Version != "" {
		b.WriteByte('@')
		b.WriteString(id.Version)
	}
	if id.Hash != "" {
		b.WriteByte('#')
		b.WriteString(id.Hash)
	}
	return b.String()
}

// Format is the inverse of Parse: it validates id and returns its string form.
func Format(id ID) (string, error) {
	s := id.String()
	if err := id.validate(s); err != nil {
		return "", err
	}
	return s, nil
}

// Parse splits a tool_id into its parts. Every string it accepts satisfies
// Format(Parse(s)) == s.
func Parse(s string) (ID, error) {
	if len(s) > MaxLen {
		return ID{}, &SyntaxError{Input: s, Part: "id", Reason: fmt.Sprintf("longer than %d characters", MaxLen)}
	}
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return ID{}, &SyntaxError{Input: s, Part: "id", Reason: "missing ':' between namespace and name"}
	}
	id := ID{Namespace: s[:colon]}
	rest := s[colon+1:]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		id.Hash = rest[i+1:]
		rest = rest[:i]
		if id.Hash == "" {
			return ID{}, &SyntaxError{Input: s, Part: "hash8", Reason: "empty after '#'"}
		}
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		id.Version = rest[i+1:]
		rest = rest[:i]
		if id.Version == "" {
			return ID{}, &SyntaxError{Input: s, Part: "version", Reason: "empty after '@'"}
		}
	}
	id.Name = rest
	if err := id.validate(s); err != nil {
		return ID{}, err
	}
	return id, nil
}

func (id ID) validate(s string) error {
	if len(s) > MaxLen {
		return &SyntaxError{Input: s, Part: "id", Reason: fmt.Sprintf("longer than %d characters", MaxLen)}
	}
	if r := namespaceProblem(id.Namespace); r != "" {
		return &SyntaxError{Input: s, Part: "namespace", Reason: r}
	}
	if r := nameProblem(id.Name); r != "" {
		return &SyntaxError{Input: s, Part: "name", Reason: r}
	}
	if id.Version != "" {
		if r := versionProblem(id.Version); r != "" {
			return &SyntaxError{Input: s, Part: "version", Reason: r}
		}
	}
	if id.Hash != "" {
		if r := hashProblem(id.Hash); r != "" {
			return &SyntaxError{Input: s, Part: "hash8", Reason: r}
		}
	}
	return nil
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// namespace = [a-z] [a-z0-9_-]{0,63}
func namespaceProblem(ns string) string {
	switch {
	case ns == "":
		return "empty"
	case len(ns) > maxNamespace:
		return fmt.Sprintf("longer than %d characters", maxNamespace)
	case !isLower(ns[0]):
		return "must start with a lower-case letter"
	}
	for i := 1; i < len(ns); i++ {
		if c := ns[i]; !isLower(c) && !isDigit(c) && c != '_' && c != '-' {
			return fmt.Sprintf("character %q not allowed", rune(c))
		}
	}
	return ""
}

// name = [A-Za-z_] [A-Za-z0-9_.-]{0,127}
func nameProblem(n string) string {
	switch {
	case n == "":
		return "empty"
	case len(n) > maxName:
		return fmt.Sprintf("longer than %d characters", maxName)
	case !isNameStart(n[0]):
		return "must start with a letter or '_'"
	}
	for i := 1; i < len(n); i++ {
		if !isNameChar(n[i]) {
			return fmt.Sprintf("character %q not allowed", rune(n[i]))
		}
	}
	return ""
}

func isNameStart(c byte) bool { return isLower(c) || isUpper(c) || c == '_' }
func isNameChar(c byte) bool {
	return isLower(c) || isUpper(c) || isDigit(c) || c == '_' || c == '.' || c == '-'
}

// version = [A-Za-z0-9._-]{1,32}
func versionProblem(v string) string {
	if v == "" {
		return "empty"
	}
	if len(v) > maxVersion {
		return fmt.Sprintf("longer than %d characters", maxVersion)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isLower(c) && !isUpper(c) && !isDigit(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Sprintf("character %q not allowed", rune(c))
		}
	}
	return ""
}

// hash8 = [0-9a-f]{8}
func hashProblem(h string) string {
	if len(h) != hashLen {
		return "must be 8 lower-case hex digits"
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return "must be 8 lower-case hex digits"
		}
	}
	return ""
}

// ValidNamespace reports whether ns satisfies the namespace grammar.
func ValidNamespace(ns string) bool { return namespaceProblem(ns) == "" }

// ValidName reports whether n satisfies the name grammar.
func ValidName(n string) bool { return nameProblem(n) == "" }

// ValidVersion reports whether v satisfies the version grammar.
func ValidVersion(v string) bool { return versionProblem(v) == "" }
