package guard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/internal/boundedread"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Class is a tool's registry classification.
type Class string

// The classes. Only read and write appear in manifests; a tool no manifest
// lists is unclassified.
const (
	ClassRead         Class = "read"
	ClassWrite        Class = "write"
	ClassUnclassified Class = "unclassified"
	// ClassDestructive appears in manifests only: the policy of such a
	// tool has Class write and Destructive set.
	ClassDestructive Class = "destructive"
)

// Encoding is a document_spec content_encoding.
type Encoding string

// The content encodings (spec 000 invariant 3: no newline normalization).
const (
	// EncodingUTF8: the document is the UTF-8 bytes of the string.
	EncodingUTF8 Encoding = "utf8"
	// EncodingBase64: the document is the standard, padded base64 decoding
	// of the string.
	EncodingBase64 Encoding = "base64"
)

// Default document limits (spec 000 §9.2.0), in decoded bytes.
const (
	DefaultMaxReadBytes  int64 = 10 << 20
	DefaultMaxWriteBytes int64 = 5 << 20
	DefaultMaxBatchBytes int64 = 50 << 20
)

// Bounds of what LoadRegistry reads.
const (
	// MaxManifestBytes bounds one manifest file.
	MaxManifestBytes = 4 << 20
	// MaxManifests bounds the manifests of one registry.
	MaxManifests = 4096
)

// SchemaID and SchemaVersion are the manifest header constants.
const (
	SchemaID      = "talos.mcp.tool_registry"
	SchemaVersion = "v1"
)

// ErrManifest is wrapped by every manifest and registry loading error.
var ErrManifest = errors.New("invalid tool registry manifest")

// DocumentSpec locates and bounds the documents of a document operation.
// Limits are filled with the defaults when the manifest omits them.
type DocumentSpec struct {
	ContentEncoding      Encoding
	WriteContentPointers []string
	ReadContentPointers  []string
	MaxReadBytes         int64
	MaxWriteBytes        int64
	MaxBatchBytes        int64
}

// ToolPolicy is one tool's entry in the registry. It is shared and must not
// be modified.
type ToolPolicy struct {
	ServerID      string
	ServerVersion string
	ToolName      string
	Class         Class
	// Destructive is set for a tool the manifest classifies destructive:
	// Class is then write, and the caller also needs the
	// allow_destructive permission (spec 002 §1.6).
	Destructive  bool
	IsDocumentOp bool
	// Document is set exactly when IsDocumentOp.
	Document *DocumentSpec
}

// Manifest is one parsed and validated tool_registry manifest.
type Manifest struct {
	// Source names where the manifest came from (a file path).
	Source        string
	ServerID      string
	ServerVersion string
	Tools         []ToolPolicy
	// canonical is the manifest as canonical JSON: sorted keys, no
	// insignificant whitespace, integral numbers written as integers.
	canonical []byte
}

// ManifestParser validates manifests against the embedded
// schemas/mcp/tool_registry.schema.json. It is immutable and safe for
// concurrent use.
type ManifestParser struct {
	schema *jsonschema.Schema
}

// registrySchemaURL is the $id of the registry schema.
const registrySchemaURL = "https://quiver-mcp.dev/schemas/mcp/tool_registry.schema.json"

// NewManifestParser compiles the registry schema.
func NewManifestParser() (*ManifestParser, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.ToolRegistry))
	if err != nil {
		return nil, fmt.Errorf("tool registry schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(registrySchemaURL, doc); err != nil {
		return nil, fmt.Errorf("tool registry schema: %w", err)
	}
	sch, err := c.Compile(registrySchemaURL)
	if err != nil {
		return nil, fmt.Errorf("tool registry schema: %w", err)
	}
	return &ManifestParser{schema: sch}, nil
}

// refusingLoader refuses every external reference: the schemas are
// self-contained.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q refused", url)
}

// Parse decodes one manifest (JSON, or YAML when source ends in .yaml or
// .yml), validates it against the schema, checks that its tool names are
// unique, and fills the default limits. Errors wrap ErrManifest and name
// source and the offending JSON pointer.
func (p *ManifestParser) Parse(source string, data []byte) (*Manifest, error) {
	fail := func(ptr, format string, args ...any) error {
		where := source
		if ptr != "" {
			where += ": " + ptr
		}
		return fmt.Errorf("%w: %s: %s", ErrManifest, where, oneLine(fmt.Sprintf(format, args...)))
	}
	if len(data) > MaxManifestBytes {
		return nil, fail("", "larger than %d bytes", MaxManifestBytes)
	}
	js := data
	if ext := strings.ToLower(filepath.Ext(source)); ext == ".yaml" || ext == ".yml" {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fail("", "not valid YAML: %v", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fail("", "YAML that has no JSON form: %v", err)
		}
		js = b
	}
	doc, err := decodeStrictJSON(js)
	if err != nil {
		return nil, fail("", "not valid JSON: %v", err)
	}
	if err := p.schema.Validate(doc); err != nil {
		ptr, msg := leafError(err)
		return nil, fail(ptr, "%s", msg)
	}
	canonical, err := json.Marshal(normalizeNumbers(doc))
	if err != nil {
		return nil, fail("", "%v", err)
	}
	var raw rawManifest
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fail("", "%v", err)
	}
	m := &Manifest{Source: source, ServerID: raw.ServerID, ServerVersion: raw.ServerVersion, canonical: canonical}
	seen := make(map[string]int, len(raw.Tools))
	for i, t := range raw.Tools {
		ptr := "/tools/" + strconv.Itoa(i)
		if j, dup := seen[t.ToolName]; dup {
			return nil, fail(ptr+"/tool_name", "tool %q is listed twice (first at /tools/%d)", t.ToolName, j)
		}
		seen[t.ToolName] = i
		pol := ToolPolicy{ServerID: raw.ServerID, ServerVersion: raw.ServerVersion, ToolName: t.ToolName,
			Class: Class(t.ToolClass), IsDocumentOp: t.IsDocumentOp}
		if Class(t.ToolClass) == ClassDestructive {
			pol.Class, pol.Destructive = ClassWrite, true
		}
		if t.IsDocumentOp && t.DocumentSpec != nil {
			d := t.DocumentSpec
			spec := &DocumentSpec{ContentEncoding: Encoding(d.ContentEncoding),
				WriteContentPointers: d.WriteContentPointers, ReadContentPointers: d.ReadContentPointers}
			for _, lim := range []struct {
				name string
				in   *json.Number
				out  *int64
				def  int64
			}{
				{"max_read_bytes", d.MaxReadBytes, &spec.MaxReadBytes, DefaultMaxReadBytes},
				{"max_write_bytes", d.MaxWriteBytes, &spec.MaxWriteBytes, DefaultMaxWriteBytes},
				{"max_batch_bytes", d.MaxBatchBytes, &spec.MaxBatchBytes, DefaultMaxBatchBytes},
			} {
				*lim.out = lim.def
				if lim.in == nil {
					continue
				}
				n, err := lim.in.Int64()
				if err != nil || n < 1 {
					return nil, fail(ptr+"/document_spec/"+lim.name, "must be an integer from 1 to %d", int64(1<<63-1))
				}
				*lim.out = n
			}
			pol.Document = spec
		}
		m.Tools = append(m.Tools, pol)
	}
	return m, nil
}

type rawManifest struct {
	SchemaID      string    `json:"schema_id"`
	SchemaVersion string    `json:"schema_version"`
	ServerID      string    `json:"server_id"`
	ServerVersion string    `json:"server_version"`
	Tools         []rawTool `json:"tools"`
}

type rawTool struct {
	ToolName     string      `json:"tool_name"`
	ToolClass    string      `json:"tool_class"`
	IsDocumentOp bool        `json:"is_document_op"`
	DocumentSpec *rawDocSpec `json:"document_spec,omitempty"`
}

type rawDocSpec struct {
	ContentEncoding      string       `json:"content_encoding"`
	WriteContentPointers []string     `json:"write_content_pointers"`
	ReadContentPointers  []string     `json:"read_content_pointers"`
	MaxReadBytes         *json.Number `json:"max_read_bytes"`
	MaxWriteBytes        *json.Number `json:"max_write_bytes"`
	MaxBatchBytes        *json.Number `json:"max_batch_bytes"`
}

// decodeStrictJSON decodes exactly one JSON value with numbers kept exact,
// refusing trailing data.
func decodeStrictJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the manifest")
	}
	return v, nil
}

// normalizeNumbers rewrites integral numbers written with a fraction or an
// exponent ("5.0", "5e0") as integers, so equal manifests have one
// canonical form.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			x[k] = normalizeNumbers(c)
		}
	case []any:
		for i, c := range x {
			x[i] = normalizeNumbers(c)
		}
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			return x
		}
		if f, err := x.Float64(); err == nil && f == float64(int64(f)) && f >= -(1<<53) && f <= 1<<53 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
	}
	return v
}

// leafError returns the location and message of the first, deepest
// validation failure.
func leafError(err error) (string, string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "", err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := append([]string(nil), ve.InstanceLocation...)
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String(), ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// oneLine collapses white space runs, line breaks included, to one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// toolKey indexes the registry.
type toolKey struct{ server, tool string }

// Registry is an immutable set of manifests, indexed by {server_id,
// tool_name} and identified by its version. The zero Registry, and a nil
// *Registry, are the empty registry.
type Registry struct {
	version   string
	manifests []*Manifest
	tools     map[toolKey]*ToolPolicy
}

// NewRegistry builds a registry from manifests. Two manifests for one
// server_id are an error (the registry would be ambiguous).
func NewRegistry(ms ...*Manifest) (*Registry, error) {
	if len(ms) > MaxManifests {
		return nil, fmt.Errorf("%w: %d manifests, at most %d", ErrManifest, len(ms), MaxManifests)
	}
	sorted := append([]*Manifest(nil), ms...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ServerID < sorted[j].ServerID })
	r := &Registry{manifests: sorted, tools: map[toolKey]*ToolPolicy{}}
	for i, m := range sorted {
		if i > 0 && sorted[i-1].ServerID == m.ServerID {
			return nil, fmt.Errorf("%w: %s and %s both classify server %q", ErrManifest, sorted[i-1].Source, m.Source, m.ServerID)
		}
		for j := range m.Tools {
			r.tools[toolKey{m.ServerID, m.Tools[j].ToolName}] = &m.Tools[j]
		}
	}
	r.version = versionOf(sorted)
	return r, nil
}

// versionOf is "sha256:" and the hex sha256 of the JSON array of the
// canonical manifests, ordered by server_id.
func versionOf(ms []*Manifest) string {
	h := sha256.New()
	h.Write([]byte{'['})
	for i, m := range ms {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(m.canonical)
	}
	h.Write([]byte{']'})
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Version identifies the registry's content: "sha256:" followed by the
// sha256 of its canonical manifests. Equal manifests give equal versions,
// whatever their file names, order, formatting or format (JSON or YAML).
func (r *Registry) Version() string {
	if r == nil || r.version == "" {
		return versionOf(nil)
	}
	return r.version
}

// Lookup returns the policy of {serverID, toolName}; false means the tool
// is unclassified.
func (r *Registry) Lookup(serverID, toolName string) (*ToolPolicy, bool) {
	if r == nil {
		return nil, false
	}
	p, ok := r.tools[toolKey{serverID, toolName}]
	return p, ok
}

// ClassOf returns the tool's class: read, write or unclassified.
func (r *Registry) ClassOf(serverID, toolName string) Class {
	if p, ok := r.Lookup(serverID, toolName); ok {
		return p.Class
	}
	return ClassUnclassified
}

// Manifests returns the number of manifests.
func (r *Registry) Manifests() int {
	if r == nil {
		return 0
	}
	return len(r.manifests)
}

// Tools returns the number of classified tools.
func (r *Registry) Tools() int {
	if r == nil {
		return 0
	}
	return len(r.tools)
}

// HasWrites reports whether any tool is classified write.
func (r *Registry) HasWrites() bool {
	if r == nil {
		return false
	}
	for _, p := range r.tools {
		if p.Class == ClassWrite {
			return true
		}
	}
	return false
}

// LoadRegistry reads every manifest matched by globs (absolute paths or
// relative to the working directory) into a registry. A glob that matches
// no file is an error, so that a mistyped path cannot silently leave tools
// unclassified; a file matched by two globs is read once. No globs give the
// empty registry.
func LoadRegistry(globs []string) (*Registry, error) {
	if len(globs) == 0 {
		return NewRegistry()
	}
	p, err := NewManifestParser()
	if err != nil {
		return nil, err
	}
	files, err := boundedread.Glob(globs, MaxManifests)
	if err != nil {
		return nil, fmt.Errorf("%w: registry: %w", ErrManifest, err)
	}
	var ms []*Manifest
	for _, f := range files {
		data, err := boundedread.File(f, MaxManifestBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrManifest, err)
		}
		m, err := p.Parse(f, data)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return NewRegistry(ms...)
}

// Extend returns a registry holding r's manifests and ms (r is not
// changed): how the manifests of cli upstreams, which classify their own
// tools, join the configured registry files.
func (r *Registry) Extend(ms ...*Manifest) (*Registry, error) {
	var base []*Manifest
	if r != nil {
		base = r.manifests
	}
	return NewRegistry(append(append([]*Manifest(nil), base...), ms...)...)
}

// ClassifyTools builds the manifest of server serverID from classes, a
// tool name to class map (read, write or destructive), through the same parser and schema as a manifest
// file (source names it in errors).
func ClassifyTools(source, serverID string, classes map[string]Class) (*Manifest, error) {
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	tools := make([]rawTool, 0, len(names))
	for _, n := range names {
		tools = append(tools, rawTool{ToolName: n, ToolClass: string(classes[n])})
	}
	doc, err := json.Marshal(rawManifest{SchemaID: SchemaID, SchemaVersion: SchemaVersion, ServerID: serverID, ServerVersion: "cli", Tools: tools})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrManifest, source, err)
	}
	p, err := NewManifestParser()
	if err != nil {
		return nil, err
	}
	return p.Parse(source, doc)
}
