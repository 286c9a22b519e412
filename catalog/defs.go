package catalog

import "encoding/json"

// ToolDef is one upstream tool definition as an upstream listed it, or as a
// catalog file recorded it. Field names follow the MCP wire format.
type ToolDef struct {
	// Server is the upstream server's own name, "" when unknown. For a
	// configured upstream it is the upstream's configured name.
	Server       string          `json:"server,omitempty"`
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the upstream's unverified hints (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint, title).
	Annotations map[string]any `json:"annotations,omitempty"`
	Meta        map[string]any `json:"_meta,omitempty"`
	// Result is a canned call result carried by static catalog files; a
	// static upstream answers with it. Live upstreams never set it.
	Result json.RawMessage `json:"result,omitempty"`
}

// ResourceDef is one upstream resource.
type ResourceDef struct {
	Server      string         `json:"server,omitempty"`
	URI         string         `json:"uri"`
	Name        string         `json:"name,omitempty"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	MIMEType    string         `json:"mimeType,omitempty"`
	Size        int64          `json:"size,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
	Meta        map[string]any `json:"_meta,omitempty"`
	// Text is the canned content of a static catalog's resource.
	Text string `json:"text,omitempty"`
}

// PromptArgument is one declared argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// UnmarshalJSON accepts an argument object or, as shorthand, its bare name.
func (a *PromptArgument) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err == nil {
		*a = PromptArgument{Name: name}
		return nil
	}
	type plain PromptArgument
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*a = PromptArgument(p)
	return nil
}

// PromptDef is one upstream prompt.
type PromptDef struct {
	Server      string           `json:"server,omitempty"`
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Meta        map[string]any   `json:"_meta,omitempty"`
	// Messages are the canned messages of a static catalog's prompt.
	Messages json.RawMessage `json:"messages,omitempty"`
}

// Source is everything a catalog is built from, in catalog order: the order
// decides which of two colliding ids keeps the bare form (spec 003 §9.3), so
// callers concatenate upstream listings in a stable (configuration) order.
type Source struct {
	Tools     []ToolDef     `json:"tools"`
	Resources []ResourceDef `json:"resources,omitempty"`
	Prompts   []PromptDef   `json:"prompts,omitempty"`
}

// version returns the upstream-declared version of a definition, from
// _meta.version, or "".
func metaVersion(meta map[string]any) string {
	if v, ok := meta["version"].(string); ok {
		return v
	}
	return ""
}

func boolHint(m map[string]any, key string) (value, present bool) {
	v, ok := m[key].(bool)
	return v, ok
}
