// Package registrygen drafts tool_registry manifests (spec 000) from what a
// fleet's servers list, and tells what changed in the fleet since.
//
// A draft classifies each tool from its own annotations and never guesses
// read: readOnlyHint true is read; destructiveHint true, no hint, or both
// hints at once is write. It leaves document specs to the user and says
// so in its header comment. Manifests are YAML (the registry loader reads
// them) so that they carry those comments; the schema allows no extra
// field, so what drift detection needs — each tool's input schema hash and
// annotations when the draft was made — is kept beside them in a lock file.
package registrygen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/guard"
)

// LockName is the lock file's name in the registry directory. It does not
// end in .json or .yaml, so registry globs never take it for a manifest.
const LockName = "fleet.lock"

// MaxLockBytes bounds the lock file ReadLock reads.
const MaxLockBytes = 16 << 20

// Tool is one tool as a server lists it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the tool's inputSchema as listed.
	InputSchema json.RawMessage
	// Annotations are its hints (readOnlyHint, destructiveHint, ...).
	Annotations map[string]any
}

// Server is one upstream and its tools.
type Server struct {
	// Name is the upstream's configured name: the manifest's server_id.
	Name string
	// Version is the server's own serverInfo version, Protocol the
	// revision negotiated; both informational.
	Version, Protocol string
	Tools             []Tool
}

// Classify returns the class a draft gives a tool with these annotations,
// and why, in a few words.
func Classify(ann map[string]any) (guard.Class, string) {
	ro, roSet := ann["readOnlyHint"].(bool)
	de, deSet := ann["destructiveHint"].(bool)
	switch {
	case ro && deSet && de:
		return guard.ClassWrite, "readOnlyHint and destructiveHint contradict each other: write"
	case ro:
		return guard.ClassRead, "readOnlyHint"
	case deSet && de:
		return guard.ClassWrite, "destructiveHint: destructive"
	case roSet:
		return guard.ClassWrite, "readOnlyHint false"
	}
	return guard.ClassWrite, "no readOnlyHint: write unless you know it changes nothing"
}

// SchemaHash is "sha256:" and the hex sha256 of the canonical JSON of an
// input schema (keys sorted, numbers as written): equal schemas hash
// alike whatever their formatting or key order.
func SchemaHash(schema json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	canon := []byte("null")
	if len(bytes.TrimSpace(schema)) > 0 && dec.Decode(&v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Manifest is the YAML draft of s's manifest: every tool classified by
// Classify, none a document operation, with the comments a reviewer needs.
func Manifest(s Server) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# tool_registry manifest (spec 000) of server %s, drafted by `quiver registry init`\n", quote(s.Name))
	if s.Version != "" || s.Protocol != "" {
		w("# from the %d tools it listed (version %s, protocol %s).\n", len(s.Tools), comment(s.Version), comment(s.Protocol))
	}
	w("#\n# Review it before serving in environment prod:\n")
	w("#  - tool_class: read is for tools that change nothing. The draft follows the\n")
	w("#    server's own annotations and never guesses read: readOnlyHint -> read;\n")
	w("#    destructiveHint, or no hint -> write (a write call needs an idempotency key).\n")
	w("#  - is_document_op: the draft sets false everywhere. For a tool that reads or writes\n")
	w("#    documents, set true and add a document_spec (content_encoding and the JSON\n")
	w("#    pointers of its content: write_content_pointers, read_content_pointers).\n")
	w("#  - remove the tools you do not want called: a tool no manifest lists is denied.\n")
	w("# %s beside this file records what the tools looked like; `quiver registry diff`\n", LockName)
	w("# reports tools that appeared, vanished or changed since.\n")
	w("schema_id: %s\nschema_version: %s\nserver_id: %s\n", guard.SchemaID, guard.SchemaVersion, quote(s.Name))
	if v := strings.TrimSpace(s.Version); v != "" && len(v) <= 128 {
		w("server_version: %s\n", quote(v))
	}
	if len(s.Tools) == 0 {
		w("tools: []\n")
		return b.Bytes()
	}
	w("tools:\n")
	for _, t := range sortedTools(s.Tools) {
		class, why := Classify(t.Annotations)
		w("  # %s", why)
		if d := comment(t.Description); d != "" {
			w(" | %s", d)
		}
		w("\n  - tool_name: %s\n    tool_class: %s\n    is_document_op: false\n", quote(t.Name), class)
	}
	return b.Bytes()
}

// sortedTools returns tools ordered by name, duplicates dropped (the first
// listing wins, as in the catalog).
func sortedTools(tools []Tool) []Tool {
	seen := map[string]bool{}
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// quote writes s as a double-quoted YAML scalar (JSON quoting).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// comment makes upstream-controlled text safe and short for a YAML
// comment: one line, no control characters, at most 100 runes.
func comment(s string) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 || r == 0x85 {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	return s
}

// Lock records the fleet as the drafts saw it.
type Lock struct {
	// Comment says what the file is (JSON has no comments).
	Comment string `json:"comment"`
	// Servers by name.
	Servers map[string]LockServer `json:"servers"`
}

// LockServer is one server in a Lock.
type LockServer struct {
	ServerVersion string              `json:"server_version,omitempty"`
	Tools         map[string]LockTool `json:"tools"`
}

// LockTool is one tool in a Lock.
type LockTool struct {
	// InputSchema is SchemaHash of its input schema.
	InputSchema string `json:"input_schema"`
	// Annotations are its hints as listed.
	Annotations map[string]any `json:"annotations,omitempty"`
}

const lockComment = "Written by `quiver registry init` beside the manifests it drafted: each tool's input schema hash and annotations as its server listed them. `quiver registry diff` compares the fleet with it. Not a manifest; do not edit."

// NewLock records servers.
func NewLock(servers []Server) *Lock {
	l := &Lock{Comment: lockComment, Servers: map[string]LockServer{}}
	for _, s := range servers {
		ls := LockServer{ServerVersion: s.Version, Tools: map[string]LockTool{}}
		for _, t := range sortedTools(s.Tools) {
			ls.Tools[t.Name] = LockTool{InputSchema: SchemaHash(t.InputSchema), Annotations: t.Annotations}
		}
		l.Servers[s.Name] = ls
	}
	return l
}

// Marshal writes the lock as indented JSON (map keys sorted).
func (l *Lock) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ErrLock is wrapped by ReadLock's errors.
var ErrLock = errors.New("invalid registry lock")

// ReadLock reads the lock file at path (at most MaxLockBytes).
func ReadLock(path string) (*Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxLockBytes+1))
	if err != nil {
		return nil, err
	}
	return ParseLock(path, data)
}

// ParseLock decodes a lock file's content.
func ParseLock(name string, data []byte) (*Lock, error) {
	if len(data) > MaxLockBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrLock, name, MaxLockBytes)
	}
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrLock, name, oneLine(err.Error()))
	}
	if l.Servers == nil {
		return nil, fmt.Errorf("%w: %s: no servers", ErrLock, name)
	}
	return &l, nil
}

// Change kinds reported by Diff.
const (
	Appeared    = "appeared"
	Vanished    = "vanished"
	Schema      = "schema"
	Annotations = "annotations"
)

// Change is one difference between the lock and the fleet.
type Change struct {
	Kind         string
	Server, Tool string
	// Detail says what changed, for Schema and Annotations.
	Detail string
}

// String is the change as `quiver registry diff` prints it.
func (c Change) String() string {
	mark := map[string]string{Appeared: "+", Vanished: "-", Schema: "~", Annotations: "~"}[c.Kind]
	id := c.Server + ":" + c.Tool
	switch c.Kind {
	case Appeared:
		return fmt.Sprintf("%s %s appeared (unclassified until a manifest lists it)", mark, id)
	case Vanished:
		return fmt.Sprintf("%s %s vanished", mark, id)
	case Schema:
		return fmt.Sprintf("%s %s input schema changed (%s)", mark, id, c.Detail)
	}
	return fmt.Sprintf("%s %s annotations changed (%s)", mark, id, c.Detail)
}

// Diff compares the fleet now with the lock: tools that appeared, vanished,
// or changed input schema or annotations, ordered by server and tool.
func Diff(lock *Lock, now []Server) []Change {
	var out []Change
	cur := NewLock(now)
	names := map[string]bool{}
	for n := range lock.Servers {
		names[n] = true
	}
	for n := range cur.Servers {
		names[n] = true
	}
	for _, server := range sortedKeys(names) {
		was, now := lock.Servers[server].Tools, cur.Servers[server].Tools
		tools := map[string]bool{}
		for t := range was {
			tools[t] = true
		}
		for t := range now {
			tools[t] = true
		}
		for _, tool := range sortedKeys(tools) {
			a, hadA := was[tool]
			b, hasB := now[tool]
			switch {
			case !hadA:
				out = append(out, Change{Kind: Appeared, Server: server, Tool: tool})
			case !hasB:
				out = append(out, Change{Kind: Vanished, Server: server, Tool: tool})
			default:
				if a.InputSchema != b.InputSchema {
					out = append(out, Change{Kind: Schema, Server: server, Tool: tool, Detail: short(a.InputSchema) + " -> " + short(b.InputSchema)})
				}
				if d := hintDiff(a.Annotations, b.Annotations); d != "" {
					out = append(out, Change{Kind: Annotations, Server: server, Tool: tool, Detail: d})
				}
			}
		}
	}
	return out
}

// hintDiff describes the annotations that differ, "" when none does.
func hintDiff(a, b map[string]any) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var parts []string
	for _, k := range sortedKeys(keys) {
		x, _ := json.Marshal(a[k])
		y, _ := json.Marshal(b[k])
		if !bytes.Equal(x, y) {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", k, absent(a, k, x), absent(b, k, y)))
		}
	}
	return strings.Join(parts, ", ")
}

func absent(m map[string]any, k string, v []byte) string {
	if _, ok := m[k]; !ok {
		return "absent"
	}
	return string(v)
}

// short cuts a schema hash for display.
func short(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12]
	}
	return h
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
