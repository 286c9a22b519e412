// Package mcpimport reads the MCP server lists of the clients people already
// use — the mcpServers JSON of Claude Desktop, Cursor, Claude Code
// (.mcp.json) and Windsurf, and the servers JSON of VS Code
// (.vscode/mcp.json, with its inputs) — and writes the equivalent quiver
// configuration as commented YAML.
//
// The conversion keeps the file's secrets out of the YAML: quiver reads
// every secret from its own environment at start. A literal value of a
// secret-looking env entry becomes a reference to the variable of the same
// name, and a literal header value becomes a reference to a variable named
// after the server and the header, each with a warning naming the variable
// to set. ${env:NAME} and ${NAME} (and ${NAME:-default}, the default
// dropped) become ${NAME}; a VS Code ${input:ID} becomes the variable ID
// upper-cased, '-' and '.' read as '_' (quiver prompts for nothing).
//
// Convert never panics, and refuses input larger than MaxFileSize before
// it parses it; every error names the file and the key.
package mcpimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxFileSize is the largest file Convert reads (as config.MaxFileSize).
const MaxFileSize = 1 << 20

// MaxServers bounds the servers of one file.
const MaxServers = 1024

// Dialect is the layout of an MCP client's configuration file.
type Dialect string

// The dialects Convert reads.
const (
	// DialectMCPServers is {"mcpServers": {NAME: {...}}}: Claude Desktop,
	// Cursor, Claude Code (.mcp.json) and Windsurf.
	DialectMCPServers Dialect = "mcpServers"
	// DialectVSCode is {"servers": {NAME: {...}}, "inputs": [...]}: VS
	// Code's .vscode/mcp.json (or "mcp": {"servers": ...} in its
	// settings.json).
	DialectVSCode Dialect = "servers"
)

// ErrImport is matched (errors.Is) by every error of Convert.
var ErrImport = errors.New("cannot import MCP client configuration")

// Error is a problem with one key of the file.
type Error struct {
	// File is the file's name as given to Convert.
	File string
	// Key is the dotted path of the offending key ("mcpServers.github.args[1]"),
	// "" for the file as a whole.
	Key string
	Msg string
}

// Error implements error: "FILE: KEY: MSG".
func (e *Error) Error() string {
	if e.Key == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Key + ": " + e.Msg
}

// Is makes errors.Is(err, ErrImport) true.
func (e *Error) Is(target error) bool { return target == ErrImport }

// member is one key of a JSON object, in file order.
type member struct {
	key string
	val json.RawMessage
}

// object decodes raw as a JSON object, keeping its keys in order and
// refusing duplicates.
func object(raw json.RawMessage) ([]member, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, false, nil
	}
	var ms []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, true, err
		}
		k, _ := tok.(string)
		if seen[k] {
			return nil, true, fmt.Errorf("key %q appears twice", k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, true, err
		}
		ms = append(ms, member{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, true, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, true, errors.New("unexpected data after the object")
	}
	return ms, true, nil
}

// get returns the value of key k among ms.
func get(ms []member, k string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == k {
			return m.val, true
		}
	}
	return nil, false
}

// stripJSONC removes // and /* */ comments and trailing commas, which VS
// Code's and Cursor's files allow (JSONC), leaving strings untouched; the
// result has the same line structure.
func stripJSONC(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(in) && in[j] != '"' {
				if in[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(in) {
				return append(out, in[i:]...)
			}
			out = append(out, in[i:j+1]...)
			i = j
		case c == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				i++
			}
			if i < len(in) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(in) && in[i+1] == '*':
			i += 2
			for i < len(in) && !(in[i] == '*' && i+1 < len(in) && in[i+1] == '/') {
				if in[i] == '\n' {
					out = append(out, '\n')
				}
				i++
			}
			i++
		case c == ',':
			j := i + 1
			for j < len(in) && (in[j] == ' ' || in[j] == '\t' || in[j] == '\r' || in[j] == '\n') {
				j++
			}
			if j < len(in) && (in[j] == '}' || in[j] == ']') {
				continue
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}

// foreignKeys name the server lists of clients Convert does not read, so
// their files get a precise refusal.
var foreignKeys = map[string]string{
	"context_servers": "Zed's context_servers",
	"mcp_servers":     "an mcp_servers list (Codex uses TOML)",
}

// quiverKeys are top-level keys of quiver's own configuration: a file with
// one is quiver's, not a client's.
var quiverKeys = []string{"upstreams", "listen", "mode", "environment", "registry"}

// Detect reports the dialect of data: DialectMCPServers, DialectVSCode, or
// "" when data is not an MCP client configuration (a quiver configuration,
// YAML, or something else). It decodes at most MaxFileSize bytes.
func Detect(data []byte) Dialect {
	if len(data) > MaxFileSize {
		return ""
	}
	ms, ok, err := object(stripJSONC(data))
	if err != nil || !ok {
		return ""
	}
	d, _ := dialectOf(ms)
	return d
}

// dialectOf returns the dialect of a top-level object and its server list.
func dialectOf(ms []member) (Dialect, json.RawMessage) {
	for _, k := range quiverKeys {
		if _, ok := get(ms, k); ok {
			return "", nil
		}
	}
	if v, ok := get(ms, "mcpServers"); ok {
		return DialectMCPServers, v
	}
	if v, ok := get(ms, "servers"); ok {
		return DialectVSCode, v
	}
	if v, ok := get(ms, "mcp"); ok {
		if inner, isObj, err := object(v); err == nil && isObj {
			if s, ok := get(inner, "servers"); ok {
				return DialectVSCode, s
			}
		}
	}
	return "", nil
}

// str decodes a JSON string.
func str(v json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// strList decodes a JSON array of strings, naming the first element that
// is not one.
func strList(v json.RawMessage) ([]string, int, bool) {
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, -1, false
	}
	out := make([]string, 0, len(raw))
	for i, r := range raw {
		s, ok := str(r)
		if !ok {
			return nil, i, false
		}
		out = append(out, s)
	}
	return out, 0, true
}

// boolean decodes a JSON boolean.
func boolean(v json.RawMessage) (bool, bool) {
	var b bool
	err := json.Unmarshal(v, &b)
	return b, err == nil
}

// keyOf appends a member name to a dotted key path, quoting names that are
// not plain.
func keyOf(parent, k string) string {
	plain := k != ""
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			plain = false
			break
		}
	}
	if !plain {
		k = strconv.Quote(k)
	}
	if parent == "" {
		return k
	}
	return parent + "." + k
}

// oneLine collapses white space runs to one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
