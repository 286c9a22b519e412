// Package cli holds the example cli tool manifests (tools/*.yaml) and the
// configuration that serves them (quiver.yaml) over a sample repository,
// embedded for `quiver eval`, which runs its cases against them.
package cli

import "embed"

// Files holds quiver.yaml and tools/*.yaml.
//
//go:embed quiver.yaml tools/*.yaml
var Files embed.FS
