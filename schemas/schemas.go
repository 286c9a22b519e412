// Package schemas embeds quiver's versioned JSON Schemas (draft 2020-12) so
// that every binary validates against exactly the files in this directory.
package schemas

import _ "embed"

// Config is schemas/config.schema.json: the configuration file of
// `quiver serve` (see runtime/config). Treat it as read-only.
//
//go:embed config.schema.json
var Config []byte
