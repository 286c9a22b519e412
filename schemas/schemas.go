// Package schemas embeds quiver's versioned JSON Schemas (draft 2020-12) so
// that every binary validates against exactly the files in this directory.
package schemas

import _ "embed"

// Config is schemas/config.schema.json: the configuration file of
// `quiver serve` (see runtime/config). Treat it as read-only.
//
//go:embed config.schema.json
var Config []byte

// ToolRegistry is schemas/mcp/tool_registry.schema.json: a tool registry
// manifest of spec 000 (see runtime/guard). Treat it as read-only.
//
//go:embed mcp/tool_registry.schema.json
var ToolRegistry []byte

// ToolCall is schemas/tool_call.schema.json: the arguments of tool_execute,
// and its inputSchema. Treat it as read-only.
//
//go:embed tool_call.schema.json
var ToolCall []byte

// ToolEffect is schemas/tool_effect.schema.json: the effect of a
// tool_execute result envelope. Treat it as read-only.
//
//go:embed tool_effect.schema.json
var ToolEffect []byte

// Policy is schemas/policy.schema.json: an access policy file (see
// runtime/policy). Treat it as read-only.
//
//go:embed policy.schema.json
var Policy []byte

// Receipt is schemas/receipt.schema.json: one line of a receipts JSONL
// file (see runtime/receipts). Treat it as read-only.
//
//go:embed receipt.schema.json
var Receipt []byte

// CLITool is schemas/cli_tool.schema.json: the manifest of one governed
// command-line tool of a cli upstream (see runtime/upstream/cli). Treat it
// as read-only.
//
//go:embed cli_tool.schema.json
var CLITool []byte
