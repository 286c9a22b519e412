package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrNotFound is returned for an id the snapshot does not hold
// (HYDRATE_FAILED, RESOURCE_NOT_FOUND or PROMPT_NOT_FOUND on the wire).
var ErrNotFound = errors.New("no such item in the catalog")

// Item is one tool, resource or prompt of a snapshot. Items are shared by
// every reader of a snapshot and must not be modified.
type Item struct {
	// ID is the catalog key: the canonical primitive id, or that id with a
	// ~N suffix when an earlier item already took it (spec 003 §9.3).
	ID string
	// Canonical is the parsed canonical id, without kind or ~N suffix.
	Canonical toolid.ID
	Kind      toolid.Kind
	// Server is the server name as the listing gave it ("" when unknown).
	Server string
	// Namespace is the id namespace the item was filed under.
	Namespace string
	// UpstreamName is the name (or, for resources, the uri) to dispatch
	// with: always the original, never the grammar-fitted form.
	UpstreamName string
	Card         choicecard.Card

	Tool     *ToolDef
	Resource *ResourceDef
	Prompt   *PromptDef

	// Findings are this item's ingest findings (also in the Report).
	Findings []Finding

	// schemaOK records that the input schema passed every ingest check.
	// The compiled validator is not kept from ingest: it is built again on
	// first use, once per item, so a catalog of tens of thousands of tools
	// holds raw schema bytes rather than compiled schemas and decoded maps.
	schemaOK  bool
	inputRaw  json.RawMessage // the checked input schema ({"type":"object"} when absent)
	validator *lazyValidator  // shared by copies of the item
	// output compiles the output schema on first use (shared by copies).
	output *lazyValidator
}

// lazyValidator compiles an item's input schema once, on first use.
type lazyValidator struct {
	once sync.Once
	sch  *jsonschema.Schema
	err  error
	// docOnce decodes the schema for CallSchema, also on first use.
	docOnce sync.Once
	doc     map[string]any
}

func (it *Item) compiled() (*jsonschema.Schema, error) {
	v := it.validator
	v.once.Do(func() {
		c := checkSchema(it.inputRaw, SchemaLimits{MaxBytes: len(it.inputRaw), MaxDepth: maxInt, MaxProperties: maxInt})
		if c.compiled == nil {
			v.err = fmt.Errorf("%s: %s: %w", it.ID, c.msg, ErrSchemaInvalid)
			return
		}
		v.sch = c.compiled
	})
	return v.sch, v.err
}

const maxInt = int(^uint(0) >> 1)

// SchemaOK reports whether the tool's input schema passed every ingest check,
// so that ValidateArgs can judge arguments.
func (it *Item) SchemaOK() bool { return it.schemaOK }

// ValidateArgs validates call arguments against the tool's compiled input
// schema. It returns an *ArgsError (ErrArgsInvalid) listing every finding,
// or ErrSchemaInvalid when the tool's own schema failed ingest checks.
// args must be a decoded JSON value (map[string]any for objects).
func (it *Item) ValidateArgs(args any) error {
	if it.Kind != toolid.KindTool {
		return fmt.Errorf("%s is a %s, not a tool: %w", it.ID, it.Kind, ErrNotFound)
	}
	if !it.schemaOK {
		return fmt.Errorf("%s: %w", it.ID, ErrSchemaInvalid)
	}
	sch, err := it.compiled()
	if err != nil {
		return err
	}
	return validate(sch, args)
}

// ErrOutputInvalid is matched (errors.Is) by ValidateOutput's refusals.
var ErrOutputInvalid = errors.New("the result does not follow the tool's outputSchema")

// ValidateOutput validates a tool result's structured content (a decoded
// JSON value) against the tool's outputSchema. A tool without one accepts
// anything; an outputSchema that failed ingest checks accepts nothing. The
// error wraps ErrOutputInvalid and an *ArgsError listing the findings
// (paths into the structured content).
func (it *Item) ValidateOutput(structured any) error {
	if it.Tool == nil || len(it.Tool.OutputSchema) == 0 {
		return nil
	}
	v := it.output
	if v == nil {
		// An item built outside ingest: compile every time.
		v = &lazyValidator{}
	}
	v.once.Do(func() {
		c := checkSchema(it.Tool.OutputSchema, SchemaLimits{MaxBytes: len(it.Tool.OutputSchema), MaxDepth: maxInt, MaxProperties: maxInt})
		if c.compiled == nil {
			v.err = fmt.Errorf("%s: outputSchema: %s: %w", it.ID, c.msg, ErrSchemaInvalid)
			return
		}
		v.sch = c.compiled
	})
	if v.err != nil {
		return fmt.Errorf("%w: %w", ErrOutputInvalid, v.err)
	}
	if err := validate(v.sch, structured); err != nil {
		return fmt.Errorf("%w: %w", ErrOutputInvalid, err)
	}
	return nil
}

// InputSchema returns the input schema decoded afresh from its raw bytes
// (nil when it is not a JSON object), so that reading a schema, as the
// router does for every tool, does not pin a decoded copy per tool.
func (it *Item) InputSchema() map[string]any {
	if it.Tool == nil {
		return nil
	}
	var doc map[string]any
	if json.Unmarshal(it.inputRaw, &doc) != nil {
		return nil
	}
	return doc
}

// CallSchema is InputSchema decoded once per item, on first use, and shared
// by every later call: for the guards that read a called tool's schema on
// each call (strict arguments, argument repair), which would otherwise
// decode it per call. Like the compiled validator, it is kept only for
// tools that are called. The map is shared: callers must not modify it.
func (it *Item) CallSchema() map[string]any {
	v := it.validator
	if v == nil || it.Tool == nil {
		return it.InputSchema()
	}
	v.docOnce.Do(func() { v.doc = it.InputSchema() })
	return v.doc
}

// Hydration is the full definition of an item, as tool_hydrate returns it.
type Hydration struct {
	ID           string          `json:"id"`
	Kind         toolid.Kind     `json:"kind"`
	Server       string          `json:"server,omitempty"`
	Namespace    string          `json:"namespace"`
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the upstream's hints, always stamped verified: false:
	// they are claims of the upstream, not facts the gateway checked.
	Annotations map[string]any `json:"annotations,omitempty"`
	Meta        map[string]any `json:"_meta,omitempty"`
	// URI and MIMEType are set for resources.
	URI      string `json:"uri,omitempty"`
	MIMEType string `json:"mimeType,omitempty"`
	// Arguments are set for prompts.
	Arguments []PromptArgument `json:"arguments,omitempty"`
	// SchemaValid is false when the input schema failed ingest checks.
	SchemaValid bool `json:"schema_valid"`
}

// Snapshot is an immutable catalog: built once by Ingest, then read
// concurrently without locks. A refresh builds a new Snapshot.
type Snapshot struct {
	items     []*Item
	byID      map[string]*Item
	byKind    map[toolid.Kind][]*Item
	report    Report
	namespace map[string]string // server -> namespace
	// byWire and wireOf map the tools' SEP-986 names (wire.go) to items
	// and back.
	byWire map[string]*Item
	wireOf map[string]string
}

// Len returns the number of items of every kind.
func (s *Snapshot) Len() int { return len(s.items) }

// Items returns the items of one kind in catalog order. The slice is shared:
// do not modify it.
func (s *Snapshot) Items(kind toolid.Kind) []*Item { return s.byKind[kind] }

// All returns every item in catalog order (tools, resources, prompts).
func (s *Snapshot) All() []*Item { return s.items }

// Lookup returns the item with catalog key id.
func (s *Snapshot) Lookup(id string) (*Item, bool) {
	it, ok := s.byID[id]
	return it, ok
}

// Report returns the ingest report the snapshot was built with.
func (s *Snapshot) Report() Report { return s.report }

// NamespaceOf returns the namespace given to a server's items.
func (s *Snapshot) NamespaceOf(server string) (string, bool) {
	ns, ok := s.namespace[server]
	return ns, ok
}

// Hydrate returns the original definition of the item with catalog key id.
func (s *Snapshot) Hydrate(id string) (Hydration, error) {
	it, ok := s.byID[id]
	if !ok {
		return Hydration{}, fmt.Errorf("%q: %w", id, ErrNotFound)
	}
	h := Hydration{ID: it.ID, Kind: it.Kind, Server: it.Server, Namespace: it.Namespace, SchemaValid: it.schemaOK}
	switch {
	case it.Tool != nil:
		t := it.Tool
		h.Name, h.Title, h.Description = t.Name, t.Title, t.Description
		h.InputSchema, h.OutputSchema, h.Meta = t.InputSchema, t.OutputSchema, t.Meta
		h.Annotations = stampUnverified(t.Annotations)
	case it.Resource != nil:
		r := it.Resource
		h.Name, h.Title, h.Description, h.Meta = r.Name, r.Title, r.Description, r.Meta
		h.URI, h.MIMEType = r.URI, r.MIMEType
		h.Annotations = stampUnverified(r.Annotations)
		h.SchemaValid = true
	case it.Prompt != nil:
		p := it.Prompt
		h.Name, h.Title, h.Description, h.Meta = p.Name, p.Title, p.Description, p.Meta
		h.Arguments = p.Arguments
		h.SchemaValid = true
	}
	return h, nil
}

func stampUnverified(a map[string]any) map[string]any {
	out := make(map[string]any, len(a)+1)
	for k, v := range a {
		out[k] = v
	}
	out["verified"] = false
	return out
}
