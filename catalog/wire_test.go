package catalog

import (
	"regexp"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/toolid"
)

var sep986 = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// checkWire asserts that every tool of s has a SEP-986 name, that the
// names are distinct and that each maps back to its tool.
func checkWire(t *testing.T, s *Snapshot) {
	t.Helper()
	seen := map[string]string{}
	for _, it := range s.Items(toolid.KindTool) {
		name, ok := s.WireName(it.ID)
		if !ok || !sep986.MatchString(name) {
			t.Fatalf("%s: wire name %q (%v)", it.ID, name, ok)
		}
		if other, dup := seen[name]; dup {
			t.Fatalf("%s and %s share the wire name %q", other, it.ID, name)
		}
		seen[name] = it.ID
		if back, ok := s.LookupWire(name); !ok || back != it {
			t.Fatalf("%q does not map back to %s", name, it.ID)
		}
	}
}

func TestWireNames(t *testing.T) {
	long := strings.Repeat("list_items_", 9) + "x"
	src := Source{Tools: []ToolDef{
		{Server: "github", Name: "create_issue", InputSchema: []byte(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Server: "github", Name: "close_issue", InputSchema: []byte(`{"type":"object"}`)},
		{Server: "acme-corporation-internal-tools", Name: long},
		{Server: "Ünïcode Server!", Name: "do.it-now"},
	}}
	s, _, err := Ingest(src, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, s)
	tools := s.Items(toolid.KindTool)
	if len(tools) != 4 {
		for _, f := range s.Report().Findings {
			t.Log(f)
		}
		t.Fatalf("%d tools", len(tools))
	}
	first := tools[0].ID
	name, _ := s.WireName(first)
	if !strings.HasPrefix(name, "github.create_issue.") || len(name) != len("github.create_issue.")+10 {
		t.Fatalf("wire name %q", name)
	}
	if long, _ := s.WireName(tools[2].ID); len(long) != wireBase+11 {
		t.Fatalf("a long name is not cut: %q", long)
	}
	// The name depends on the tool_id alone: a catalog built again, or
	// holding other tools, names the tool the same.
	s2, _, err := Ingest(Source{Tools: src.Tools[:1]}, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s2.WireName(first); again != name {
		t.Fatalf("%q then %q", name, again)
	}
	if _, ok := s.WireName("no:such#00000000"); ok {
		t.Fatal("a wire name for an unknown id")
	}
	if _, ok := s.LookupWire(first); ok {
		t.Fatal("a tool_id is not a wire name")
	}
}

// A digest collision is resolved in catalog order, still within SEP-986.
func TestWireNameCollision(t *testing.T) {
	s, _, err := Ingest(Source{Tools: []ToolDef{{Server: "a", Name: "x"}, {Server: "a", Name: "y"}, {Server: "a", Name: "z"}}}, Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	same := strings.Repeat("a", MaxWireName-3)
	s.indexWire(func(*Item) string { return same })
	checkWire(t, s)
	tools := s.Items(toolid.KindTool)
	for i, want := range []string{same, same + "-2", same + "-3"} {
		if got, _ := s.WireName(tools[i].ID); got != want {
			t.Errorf("tool %d: %q, want %q", i, got, want)
		}
	}
}

// Every tool of the shared 3,641-tool catalog gets a distinct SEP-986 name.
func TestWireNamesShared(t *testing.T) {
	s, _, err := Ingest(loadShared(t), Options{Cards: cards(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, s)
}
