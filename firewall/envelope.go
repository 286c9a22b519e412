// Package firewall shapes upstream results before they reach an agent's
// context: the ResultEnvelope every tool_execute returns, and (for large
// results) the summary, facts and artifact handles that stand in for the
// full content, which stays addressable through tool_view.
package firewall

import "encoding/json"

// Envelope statuses.
const (
	StatusOK      = "ok"
	StatusPartial = "partial"
	StatusError   = "error" // the upstream tool itself reported an error (isError)
)

// Envelope is the result of one tool_execute as the agent sees it.
type Envelope struct {
	Status  string   `json:"status"`
	Summary string   `json:"summary"`
	Facts   []string `json:"facts"`
	// Result is the upstream result inline (content items and structured
	// content), present when it fits the inline budget.
	Result     *Inline    `json:"result,omitempty"`
	Artifacts  []Artifact `json:"artifacts"`
	Views      []View     `json:"views"`
	Provenance Provenance `json:"provenance"`
	Firewall   Stats      `json:"firewall"`
	Effect     *Effect    `json:"effect,omitempty"`
	DryRun     *DryRun    `json:"dry_run,omitempty"`
}

// Inline is an upstream result carried whole.
type Inline struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
}

// Artifact describes stored content the agent can slice with tool_view.
type Artifact struct {
	Handle      string `json:"handle"`
	MediaType   string `json:"media_type"`
	SizeBytes   int64  `json:"size_bytes"`
	Label       string `json:"label"`
	ContentHash string `json:"content_hash"`
}

// View is a ready-made tool_view selector for an artifact.
type View struct {
	ViewID   string          `json:"view_id"`
	Label    string          `json:"label"`
	Selector json.RawMessage `json:"selector"`
	Handle   string          `json:"handle"`
}

// Provenance says where a result came from.
type Provenance struct {
	ToolID       string   `json:"tool_id"`
	Server       string   `json:"server"`
	UpstreamName string   `json:"upstream_name"`
	Attempts     int      `json:"attempts"`
	CacheHit     bool     `json:"cache_hit,omitempty"`
	ArgRepairs   []string `json:"arg_repairs,omitempty"`
	DurationMS   float64  `json:"duration_ms"`
	// IdempotentReplay is true when the envelope is the stored result of an
	// earlier call with the same idempotency key; nothing was dispatched.
	IdempotentReplay bool `json:"idempotent_replay,omitempty"`
}

// Stats report what the firewall did.
type Stats struct {
	// Triggered is true when anything was kept out of the envelope.
	Triggered bool `json:"triggered"`
	// Strategy is "inline", "binary" or "summary" (see the Strategy*
	// constants).
	Strategy string `json:"strategy"`
	// OriginalTokens counts the cl100k_base tokens of the text parts and
	// structured content.
	OriginalTokens int `json:"original_tokens"`
	// InlineTokens counts the tokens of what the envelope carries in place of
	// the result (see Outcome).
	InlineTokens int `json:"inline_tokens"`
	// OriginalBytes is the size of the result's content (text, decoded
	// binary and structured content).
	OriginalBytes int64 `json:"original_bytes"`
	// OriginalTokensEstimated is true when OriginalTokens was estimated from
	// samples rather than counted (content over Options.ExactTokenBytes).
	OriginalTokensEstimated bool `json:"original_tokens_estimated,omitempty"`
}

// Effect records the side-effect accounting of a call (spec 000 tool_effect,
// schemas/tool_effect.schema.json).
type Effect struct {
	// EffectID is a UUIDv7; a replayed idempotent call carries the first
	// call's.
	EffectID string `json:"effect_id"`
	// DocumentHashes lists the documents written (from the arguments) and
	// read (from the result). Never nil.
	DocumentHashes  []DocumentHash `json:"document_hashes"`
	BatchTotalBytes int64          `json:"batch_total_bytes"`
	ContentHashAlg  string         `json:"content_hash_alg"`
	// ToolClass is the registry's class: read, write or unclassified.
	ToolClass string `json:"tool_class,omitempty"`
	// RegistryVersion is the pinned registry version the call was judged by.
	RegistryVersion string `json:"registry_version,omitempty"`
}

// DocumentHash is one document of an Effect: its RFC 6901 pointer, the
// lowercase hex sha256 of its decoded bytes, and their number.
type DocumentHash struct {
	Pointer   string `json:"pointer"`
	Hash      string `json:"hash"`
	SizeBytes int64  `json:"size_bytes"`
}

// DryRun is the report of a dry-run execute: what would have happened.
type DryRun struct {
	// DryRun is always true: it marks the report as one (spec 003 §4.5).
	DryRun       bool           `json:"dry_run"`
	ToolID       string         `json:"tool_id"`
	UpstreamName string         `json:"upstream_name"`
	ArgsValid    bool           `json:"args_valid"`
	Annotations  map[string]any `json:"annotations,omitempty"`
	Checks       []Check        `json:"checks"`
	// ToolClass is the registry's class of the tool.
	ToolClass string `json:"tool_class,omitempty"`
	// Allowed is true when every check passed: the call would be dispatched
	// (or, for an idempotent repeat, answered from its record).
	Allowed bool `json:"allowed"`
	// ArgRepairs are the tolerant-argument repairs that were applied.
	ArgRepairs []string `json:"arg_repairs,omitempty"`
}

// Check is one named check of a dry run.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // pass | fail | skip
	Detail string `json:"detail,omitempty"`
}
