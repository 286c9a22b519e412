package firewall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Selector types accepted by tool_view.
const (
	// SelHead is {"type":"head","chars":N}: the first N characters (runes) of
	// the artifact (default DefaultHeadChars). Binary artifacts answer in base64,
	// where chars counts base64 characters.
	SelHead = "head"
	// SelLines is {"type":"lines","start":S,"end":E}: lines S to E, 1-based and
	// inclusive. A negative number counts from the end: -1 is the last line, so
	// {"start":-20} is the last twenty lines. start defaults to 1; without end
	// the answer runs as far as the token budget allows. A range reaching past
	// the last line is clamped to it; a start beyond the last line is an error.
	SelLines = "lines"
	// SelBytes is {"type":"bytes","offset":O,"length":L}: L bytes (default
	// DefaultBytesLength) from byte offset O (default 0). Text is aligned to
	// whole UTF-8 characters; binary artifacts answer in base64.
	SelBytes = "bytes"
	// SelJSONPointer is {"type":"json_pointer","pointer":P}: the JSON value at
	// RFC 6901 pointer P ("" is the whole document) of a JSON artifact.
	SelJSONPointer = "json_pointer"
	// SelJSONKeys is {"type":"json_keys","keys":[K...],"pointer":P}: an object
	// holding only the listed keys of the object at pointer P (default "", the
	// top level) of a JSON artifact.
	SelJSONKeys = "json_keys"
	// SelGrep is {"type":"grep","pattern":RE,"max_matches":N,"start":S}: the
	// lines matching the RE2 regular expression RE, as "line:text", at most N
	// of them (default DefaultMaxMatches), scanning from line S (default 1).
	// Lines longer than MaxLineBytes are matched on their first MaxLineBytes.
	SelGrep = "grep"
	// SelRows is {"type":"rows","start":S,"end":E}: data rows S to E (1-based,
	// inclusive, negative counts from the end, as for lines) of a CSV artifact,
	// parsed as RFC 4180 records (quoted fields may hold newlines) with the
	// header row repeated first in every answer; or records (lines) of a JSON
	// Lines artifact.
	SelRows = "rows"
)

// Selector limits and defaults.
const (
	// DefaultHeadChars is head's chars when omitted.
	DefaultHeadChars = 4000
	// MaxHeadChars caps head's chars.
	MaxHeadChars = 1 << 20
	// DefaultBytesLength is bytes' length when omitted.
	DefaultBytesLength = 4096
	// MaxBytesLength caps bytes' length.
	MaxBytesLength = 1 << 20
	// MaxLineNumber caps the magnitude of a line or row number.
	MaxLineNumber = 1 << 40
	// MaxPatternBytes caps a grep pattern.
	MaxPatternBytes = 512
	// DefaultMaxMatches is grep's max_matches when omitted.
	DefaultMaxMatches = 50
	// MaxMatchesCap caps grep's max_matches.
	MaxMatchesCap = 200
	// MaxPointerBytes caps a JSON pointer.
	MaxPointerBytes = 4096
	// MaxKeys caps the number of keys of json_keys.
	MaxKeys = 100
	// MaxKeyBytes caps each key of json_keys.
	MaxKeyBytes = 1024
	// MaxSelectorBytes caps the JSON text of a selector.
	MaxSelectorBytes = 256 << 10
	// MaxLineBytes bounds the part of a line that grep matches and that lines
	// and rows read into memory at once.
	MaxLineBytes = 64 << 10
)

// ErrBadSelector reports a selector that is malformed: not a JSON object, an
// unknown type or field, a wrongly typed value, a value out of its range, a
// JSON pointer with bad syntax or a regular expression that does not compile.
var ErrBadSelector = errors.New("firewall: bad selector")

// Selector is a parsed tool_view selector. Only the fields of its Type are
// meaningful; the others are zero. Build one with ParseSelector or by hand
// (View validates it either way). Its JSON form is canonical: "type" first,
// then the fields of that type that are set.
type Selector struct {
	// Type is one of the Sel* constants.
	Type string
	// Chars is head's character count.
	Chars int
	// Start and End delimit lines and rows (see SelLines); Start is also grep's
	// first line to scan. Zero means unset.
	Start, End int64
	// Offset and Length delimit bytes.
	Offset, Length int64
	// Pointer is json_pointer's pointer and json_keys' optional pointer.
	Pointer string
	// Keys are json_keys' keys.
	Keys []string
	// Pattern is grep's regular expression.
	Pattern string
	// MaxMatches is grep's match limit; zero means DefaultMaxMatches.
	MaxMatches int
}

// selectorFields lists the fields a selector type accepts besides "type",
// and whether the type exists.
func selectorFields(typ string) ([]string, bool) {
	switch typ {
	case SelHead:
		return []string{"chars"}, true
	case SelLines, SelRows:
		return []string{"start", "end"}, true
	case SelBytes:
		return []string{"offset", "length"}, true
	case SelJSONPointer:
		return []string{"pointer"}, true
	case SelJSONKeys:
		return []string{"keys", "pointer"}, true
	case SelGrep:
		return []string{"pattern", "max_matches", "start"}, true
	}
	return nil, false
}

// selectorTypes is the sorted list of types, for error messages.
const selectorTypes = "head, lines, bytes, json_pointer, json_keys, grep, rows"

func badSelector(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSelector, fmt.Sprintf(format, args...))
}

// ParseSelector parses and validates a selector. It is strict: the JSON must
// be one object with a known "type", only that type's fields, no duplicate
// keys, integers where integers belong and values in range. Every error wraps
// ErrBadSelector and carries a one-line message.
func ParseSelector(raw json.RawMessage) (Selector, error) {
	var sel Selector
	if len(raw) > MaxSelectorBytes {
		return sel, badSelector("selector longer than %d bytes", MaxSelectorBytes)
	}
	fields, err := objectFields(raw)
	if err != nil {
		return sel, err
	}
	typRaw, ok := fields["type"]
	if !ok {
		return sel, badSelector(`missing "type" (one of %s)`, selectorTypes)
	}
	var typ string
	if err := json.Unmarshal(typRaw, &typ); err != nil {
		return sel, badSelector(`"type" must be a string`)
	}
	allowed, ok := selectorFields(typ)
	if !ok {
		return sel, badSelector("unknown type %s (one of %s)", quoteShort(typ), selectorTypes)
	}
	sel.Type = typ
	for name := range fields {
		if name != "type" && !contains(allowed, name) {
			return sel, badSelector("%s: unknown field %s (allowed: %s)", typ, quoteShort(name), strings.Join(allowed, ", "))
		}
	}
	for _, name := range allowed {
		v, ok := fields[name]
		if !ok {
			continue
		}
		if err := sel.setField(name, v); err != nil {
			return Selector{}, err
		}
	}
	if err := sel.Validate(); err != nil {
		return Selector{}, err
	}
	return sel, nil
}

// objectFields splits a JSON object into its members, rejecting anything else
// and duplicate keys.
func objectFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, badSelector("not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, badSelector("must be a JSON object")
	}
	out := make(map[string]json.RawMessage, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badSelector("not valid JSON")
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, badSelector("not valid JSON")
		}
		if _, dup := out[key]; dup {
			return nil, badSelector("duplicate field %s", quoteShort(key))
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, badSelector("not valid JSON")
	}
	if _, err := dec.Token(); err == nil {
		return nil, badSelector("trailing data after the object")
	}
	return out, nil
}

// setField decodes one field's value.
func (s *Selector) setField(name string, v json.RawMessage) error {
	switch name {
	case "chars", "max_matches":
		n, err := jsonInt(v)
		if err != nil {
			return badSelector("%s: %s %v", s.Type, name, err)
		}
		if n < -MaxLineNumber || n > MaxLineNumber {
			return badSelector("%s: %s out of range", s.Type, name)
		}
		if name == "chars" {
			s.Chars = int(n)
			if s.Chars == 0 {
				return badSelector("%s: chars must be at least 1", s.Type)
			}
		} else {
			s.MaxMatches = int(n)
			if s.MaxMatches == 0 {
				return badSelector("%s: max_matches must be at least 1", s.Type)
			}
		}
	case "start", "end", "offset", "length":
		n, err := jsonInt(v)
		if err != nil {
			return badSelector("%s: %s %v", s.Type, name, err)
		}
		switch name {
		case "start":
			if n == 0 {
				return badSelector("%s: start must not be 0 (lines and rows count from 1; negative counts from the end)", s.Type)
			}
			s.Start = n
		case "end":
			if n == 0 {
				return badSelector("%s: end must not be 0 (lines and rows count from 1; negative counts from the end)", s.Type)
			}
			s.End = n
		case "offset":
			if n < 0 {
				return badSelector("bytes: offset must not be negative")
			}
			s.Offset = n
		case "length":
			if n < 1 {
				return badSelector("bytes: length must be at least 1")
			}
			s.Length = n
		}
	case "pointer", "pattern":
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return badSelector("%s: %s must be a string", s.Type, name)
		}
		if name == "pointer" {
			s.Pointer = str
		} else {
			s.Pattern = str
			if str == "" {
				return badSelector("grep: pattern must not be empty")
			}
		}
	case "keys":
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return badSelector("json_keys: keys must be an array of strings")
		}
		var keys []string
		if err := json.Unmarshal(v, &keys); err != nil {
			return badSelector("json_keys: keys must be an array of strings")
		}
		if len(keys) == 0 {
			return badSelector("json_keys: keys must not be empty")
		}
		s.Keys = keys
	}
	return nil
}

// jsonInt decodes a JSON integer literal (no fraction, no exponent).
func jsonInt(v json.RawMessage) (int64, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, errors.New("must be an integer")
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("out of range")
		}
		return 0, errors.New("must be an integer")
	}
	return n, nil
}

// Validate checks a selector's type and ranges, as ParseSelector does. Errors
// wrap ErrBadSelector.
func (s Selector) Validate() error {
	if _, ok := selectorFields(s.Type); !ok {
		return badSelector("unknown type %s (one of %s)", quoteShort(s.Type), selectorTypes)
	}
	switch s.Type {
	case SelHead:
		if s.Chars < 0 || s.Chars > MaxHeadChars {
			return badSelector("head: chars must be between 1 and %d", MaxHeadChars)
		}
	case SelLines, SelRows:
		if err := checkRange(s.Type, s.Start, s.End); err != nil {
			return err
		}
	case SelBytes:
		if s.Offset < 0 {
			return badSelector("bytes: offset must not be negative")
		}
		if s.Length < 0 || s.Length > MaxBytesLength {
			return badSelector("bytes: length must be between 1 and %d", MaxBytesLength)
		}
	case SelJSONPointer:
		if _, err := parsePointer(s.Pointer); err != nil {
			return err
		}
	case SelJSONKeys:
		if _, err := parsePointer(s.Pointer); err != nil {
			return err
		}
		if len(s.Keys) == 0 {
			return badSelector("json_keys: keys must not be empty")
		}
		if len(s.Keys) > MaxKeys {
			return badSelector("json_keys: at most %d keys", MaxKeys)
		}
		seen := make(map[string]bool, len(s.Keys))
		for _, k := range s.Keys {
			if len(k) > MaxKeyBytes {
				return badSelector("json_keys: key longer than %d bytes", MaxKeyBytes)
			}
			if seen[k] {
				return badSelector("json_keys: duplicate key %s", quoteShort(k))
			}
			seen[k] = true
		}
	case SelGrep:
		if s.Pattern == "" {
			return badSelector("grep: pattern must not be empty")
		}
		if len(s.Pattern) > MaxPatternBytes {
			return badSelector("grep: pattern longer than %d bytes", MaxPatternBytes)
		}
		if s.MaxMatches < 0 || s.MaxMatches > MaxMatchesCap {
			return badSelector("grep: max_matches must be between 1 and %d", MaxMatchesCap)
		}
		if s.Start < 0 || s.Start > MaxLineNumber {
			return badSelector("grep: start must be between 1 and %d", int64(MaxLineNumber))
		}
		if _, err := compilePattern(s.Pattern); err != nil {
			return err
		}
	}
	return nil
}

// checkRange validates a lines or rows range.
func checkRange(typ string, start, end int64) error {
	if start < -MaxLineNumber || start > MaxLineNumber || end < -MaxLineNumber || end > MaxLineNumber {
		return badSelector("%s: start and end must be within ±%d", typ, int64(MaxLineNumber))
	}
	if start != 0 && end != 0 && (start > 0) == (end > 0) && end < start {
		return badSelector("%s: end (%d) before start (%d)", typ, end, start)
	}
	return nil
}

// compilePattern compiles a grep pattern.
func compilePattern(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		msg := err.Error()
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "error parsing regexp") {
			msg = msg[i+2:]
		}
		return nil, badSelector("grep: pattern does not compile: %s", oneLine(msg, 160))
	}
	return re, nil
}

// MarshalJSON renders the canonical JSON form of the selector.
func (s Selector) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	writeJSONString(&b, s.Type)
	num := func(name string, v int64) {
		b.WriteString(`,"` + name + `":`)
		b.WriteString(strconv.FormatInt(v, 10))
	}
	switch s.Type {
	case SelHead:
		if s.Chars != 0 {
			num("chars", int64(s.Chars))
		}
	case SelLines, SelRows:
		if s.Start != 0 {
			num("start", s.Start)
		}
		if s.End != 0 {
			num("end", s.End)
		}
	case SelBytes:
		num("offset", s.Offset)
		if s.Length != 0 {
			num("length", s.Length)
		}
	case SelJSONPointer:
		b.WriteString(`,"pointer":`)
		writeJSONString(&b, s.Pointer)
	case SelJSONKeys:
		b.WriteString(`,"keys":[`)
		for i, k := range s.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
		}
		b.WriteByte(']')
		if s.Pointer != "" {
			b.WriteString(`,"pointer":`)
			writeJSONString(&b, s.Pointer)
		}
	case SelGrep:
		b.WriteString(`,"pattern":`)
		writeJSONString(&b, s.Pattern)
		if s.MaxMatches != 0 {
			num("max_matches", int64(s.MaxMatches))
		}
		if s.Start != 0 {
			num("start", s.Start)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON parses a selector with ParseSelector.
func (s *Selector) UnmarshalJSON(b []byte) error {
	sel, err := ParseSelector(b)
	if err != nil {
		return err
	}
	*s = sel
	return nil
}

// raw returns the canonical JSON of s.
func (s Selector) raw() json.RawMessage {
	b, _ := s.MarshalJSON()
	return b
}

// writeJSONString appends s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode appends a newline
}

// quoteShort quotes s for an error message, cut to a few dozen characters.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = validPrefix(s[:40]) + "…"
	}
	return strconv.Quote(s)
}

// oneLine removes control characters (newlines included) from s and caps it at
// max bytes.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > max {
		s = validPrefix(s[:max]) + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runeLen is utf8.RuneCountInString, named for readability at call sites.
func runeLen(s string) int { return utf8.RuneCountInString(s) }
