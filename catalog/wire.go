package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/quiver-mcp/quiver/toolid"
)

// MaxWireName is the longest tool name MCP clients accept (SEP-986:
// ^[A-Za-z0-9._-]{1,128}$).
const MaxWireName = 128

// wireBase bounds the readable part of a wire name, leaving room for the
// digest (".", 10 hex) and a collision suffix ("-99").
const wireBase = MaxWireName - 1 - 10 - 3

// wireName is the name a listing gives a tool where its tool_id cannot
// stand (proxy mode's stripped entries): the tool_id's namespace and name,
// which are within SEP-986's characters, joined by "." and followed by
// the first 10 hex digits of the sha256 of the catalog key, so that it
// depends on the tool_id alone and tells ids with the same name apart
// (versions, schema shapes, ~N).
func wireName(it *Item) string {
	base := it.Canonical.Namespace + "." + it.Canonical.Name
	if len(base) > wireBase {
		base = base[:wireBase]
	}
	sum := sha256.Sum256([]byte(it.ID))
	return base + "." + hex.EncodeToString(sum[:5])
}

// indexWire names every tool of s for the wire with name; a name another
// tool of the catalog already took (a digest collision of wireName: about
// 5e-5 at 10,000 tools) gets "-2", "-3", ... in catalog order.
func (s *Snapshot) indexWire(name func(*Item) string) {
	tools := s.byKind[toolid.KindTool]
	s.byWire = make(map[string]*Item, len(tools))
	s.wireOf = make(map[string]string, len(tools))
	for _, it := range tools {
		base := name(it)
		w := base
		for n := 2; s.byWire[w] != nil; n++ {
			w = base + "-" + strconv.Itoa(n)
		}
		s.byWire[w] = it
		s.wireOf[it.ID] = w
	}
}

// WireName returns the SEP-986 name of the tool with catalog key id, and
// false when the catalog has no such tool.
func (s *Snapshot) WireName(id string) (string, bool) {
	n, ok := s.wireOf[id]
	return n, ok
}

// LookupWire returns the tool a wire name stands for.
func (s *Snapshot) LookupWire(name string) (*Item, bool) {
	it, ok := s.byWire[name]
	return it, ok
}
