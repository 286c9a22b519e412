package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// githubManifest is the spec's example manifest.
const githubManifest = `{
  "schema_id": "talos.mcp.tool_registry",
  "schema_version": "v1",
  "server_id": "mcp-github",
  "server_version": "1.0.0",
  "tools": [
    {
      "tool_name": "create-pr",
      "tool_class": "write",
      "is_document_op": true,
      "document_spec": {
        "content_encoding": "utf8",
        "write_content_pointers": ["/body", "/files/0/content"],
        "read_content_pointers": [],
        "max_read_bytes": 10485760,
        "max_write_bytes": 5242880,
        "max_batch_bytes": 52428800
      }
    },
    {"tool_name": "list-prs", "tool_class": "read", "is_document_op": false}
  ]
}`

// githubYAML is githubManifest in YAML, with its keys reordered and one
// limit written as a float: the same manifest, so the same version.
const githubYAML = `
schema_version: v1
schema_id: talos.mcp.tool_registry
server_version: "1.0.0"
server_id: mcp-github
tools:
  - tool_class: write
    tool_name: create-pr
    is_document_op: true
    document_spec:
      content_encoding: utf8
      write_content_pointers: [/body, /files/0/content]
      read_content_pointers: []
      max_read_bytes: 10485760
      max_write_bytes: 5242880.0
      max_batch_bytes: 52428800
  - {tool_name: list-prs, tool_class: read, is_document_op: false}
`

func mustParser(t testing.TB) *ManifestParser {
	t.Helper()
	p, err := NewManifestParser()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustManifest(t testing.TB, src, name string) *Manifest {
	t.Helper()
	m, err := mustParser(t).Parse(name, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseSpecExample(t *testing.T) {
	m := mustManifest(t, githubManifest, "github.json")
	if m.ServerID != "mcp-github" || m.ServerVersion != "1.0.0" || len(m.Tools) != 2 {
		t.Fatalf("%+v", m)
	}
	pr := m.Tools[0]
	if pr.Class != ClassWrite || !pr.IsDocumentOp || pr.Document == nil || pr.Document.ContentEncoding != EncodingUTF8 ||
		len(pr.Document.WriteContentPointers) != 2 || pr.Document.MaxWriteBytes != 5<<20 {
		t.Fatalf("create-pr = %+v %+v", pr, pr.Document)
	}
	if m.Tools[1].Class != ClassRead || m.Tools[1].Document != nil {
		t.Fatalf("list-prs = %+v", m.Tools[1])
	}
}

func TestDefaultLimits(t *testing.T) {
	m := mustManifest(t, `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[
		{"tool_name":"r","tool_class":"read","is_document_op":true,"document_spec":{"content_encoding":"base64","read_content_pointers":["/content/0/text"]}}]}`, "s.json")
	d := m.Tools[0].Document
	if d.MaxReadBytes != DefaultMaxReadBytes || d.MaxWriteBytes != DefaultMaxWriteBytes || d.MaxBatchBytes != DefaultMaxBatchBytes {
		t.Fatalf("limits %+v", d)
	}
	if DefaultMaxReadBytes != 10485760 || DefaultMaxWriteBytes != 5242880 || DefaultMaxBatchBytes != 52428800 {
		t.Fatal("spec defaults changed")
	}
}

func TestParseRejects(t *testing.T) {
	head := `"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s"`
	tool := func(body string) string { return `{` + head + `,"tools":[` + body + `]}` }
	cases := []struct {
		name, src, want string
	}{
		{"not json", `{`, "not valid JSON"},
		{"trailing data", `{` + head + `,"tools":[]} {}`, "not valid JSON"},
		{"wrong schema_id", `{"schema_id":"x","schema_version":"v1","server_id":"s","tools":[]}`, "/schema_id"},
		{"wrong version", `{"schema_id":"talos.mcp.tool_registry","schema_version":"v2","server_id":"s","tools":[]}`, "/schema_version"},
		{"missing server_id", `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","tools":[]}`, "server_id"},
		{"unknown root key", `{` + head + `,"tools":[],"extra":1}`, "extra"},
		{"unknown tool key", tool(`{"tool_name":"t","tool_class":"read","is_document_op":false,"risk":"x"}`), "/tools/0"},
		{"bad class", tool(`{"tool_name":"t","tool_class":"admin","is_document_op":false}`), "/tools/0/tool_class"},
		{"missing is_document_op", tool(`{"tool_name":"t","tool_class":"read"}`), "/tools/0"},
		{"document op without spec", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true}`), "/tools/0"},
		{"spec on a non-document op", tool(`{"tool_name":"t","tool_class":"read","is_document_op":false,"document_spec":{"content_encoding":"utf8"}}`), "/tools/0"},
		{"write doc op without write pointers", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","read_content_pointers":["/a"]}}`), "/tools/0/document_spec"},
		{"write doc op with empty write pointers", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":[]}}`), "/tools/0/document_spec/write_content_pointers"},
		{"read doc op without read pointers", tool(`{"tool_name":"t","tool_class":"read","is_document_op":true,"document_spec":{"content_encoding":"utf8"}}`), "/tools/0/document_spec"},
		{"bad encoding", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"latin1","write_content_pointers":["/a"]}}`), "content_encoding"},
		{"jsonpath, not a pointer", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["$.body"]}}`), "write_content_pointers/0"},
		{"bad escape", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/a~2"]}}`), "write_content_pointers/0"},
		{"zero limit", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/a"],"max_write_bytes":0}}`), "max_write_bytes"},
		{"fractional limit", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/a"],"max_write_bytes":1.5}}`), "max_write_bytes"},
		{"huge limit", tool(`{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/a"],"max_write_bytes":1e30}}`), "max_write_bytes"},
		{"duplicate tool", tool(`{"tool_name":"t","tool_class":"read","is_document_op":false},{"tool_name":"t","tool_class":"write","is_document_op":false}`), "listed twice"},
		{"empty tool name", tool(`{"tool_name":"","tool_class":"read","is_document_op":false}`), "/tools/0/tool_name"},
	}
	p := mustParser(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Parse("m.json", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), ErrManifest.Error()+": m.json") {
				t.Fatalf("error %q, want it to name %q", err, tc.want)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("multi-line error %q", err)
			}
		})
	}
}

func TestVersionIsCanonical(t *testing.T) {
	j := mustManifest(t, githubManifest, "a/github.json")
	y := mustManifest(t, githubYAML, "b/github.yaml")
	other := mustManifest(t, `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"alpha","tools":[]}`, "alpha.json")
	r1, err := NewRegistry(j, other)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := NewRegistry(other, y)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Version() != r2.Version() {
		t.Fatalf("same manifests, different versions: %s vs %s", r1.Version(), r2.Version())
	}
	if !strings.HasPrefix(r1.Version(), "sha256:") || len(r1.Version()) != len("sha256:")+64 {
		t.Fatalf("version %q", r1.Version())
	}
	flipped := mustManifest(t, strings.Replace(githubManifest, `"tool_class": "read"`, `"tool_class": "write"`, 1), "github.json")
	r3, _ := NewRegistry(flipped, other)
	if r3.Version() == r1.Version() {
		t.Fatal("a changed class kept the version")
	}
	var empty *Registry
	r0, _ := NewRegistry()
	if empty.Version() != r0.Version() || r0.Version() == r1.Version() {
		t.Fatal("empty registry versions")
	}
}

func TestRegistryLookup(t *testing.T) {
	r, err := NewRegistry(mustManifest(t, githubManifest, "github.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server, tool string
		want         Class
	}{
		{"mcp-github", "create-pr", ClassWrite},
		{"mcp-github", "list-prs", ClassRead},
		{"mcp-github", "Create-PR", ClassUnclassified}, // exact match only
		{"other", "create-pr", ClassUnclassified},
	} {
		if got := r.ClassOf(tc.server, tc.tool); got != tc.want {
			t.Errorf("%s/%s = %s, want %s", tc.server, tc.tool, got, tc.want)
		}
	}
	if r.Tools() != 2 || r.Manifests() != 1 || !r.HasWrites() {
		t.Fatalf("counts %d %d", r.Tools(), r.Manifests())
	}
	var nilReg *Registry
	if _, ok := nilReg.Lookup("a", "b"); ok || nilReg.HasWrites() || nilReg.Tools() != 0 {
		t.Fatal("nil registry")
	}
}

func TestDuplicateServer(t *testing.T) {
	a := mustManifest(t, githubManifest, "a.json")
	b := mustManifest(t, githubManifest, "b.json")
	_, err := NewRegistry(a, b)
	if err == nil || !strings.Contains(err.Error(), "a.json and b.json") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadRegistry(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("github.json", githubManifest)
	write("alpha.yaml", "schema_id: talos.mcp.tool_registry\nschema_version: v1\nserver_id: alpha\ntools: [{tool_name: echo, tool_class: write, is_document_op: false}]\n")
	r, err := LoadRegistry([]string{filepath.Join(dir, "*.json"), filepath.Join(dir, "*.yaml"), filepath.Join(dir, "github.json")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Manifests() != 2 || r.ClassOf("alpha", "echo") != ClassWrite {
		t.Fatalf("loaded %d manifests", r.Manifests())
	}
	if r0, err := LoadRegistry(nil); err != nil || r0.Tools() != 0 {
		t.Fatalf("no globs: %v", err)
	}
	for name, globs := range map[string][]string{
		"no match":    {filepath.Join(dir, "*.toml")},
		"bad pattern": {filepath.Join(dir, "[")},
	} {
		if _, err := LoadRegistry(globs); err == nil || !errors.Is(err, ErrManifest) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	write("bad.json", `{"schema_id":"talos.mcp.tool_registry"}`)
	if _, err := LoadRegistry([]string{filepath.Join(dir, "*.json")}); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("err = %v", err)
	}
	write("big.json", strings.Repeat(" ", MaxManifestBytes+1))
	if _, err := LoadRegistry([]string{filepath.Join(dir, "big.json")}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}

func TestDestructiveClass(t *testing.T) {
	p, err := NewManifestParser()
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Parse("d.json", []byte(`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s",
		"tools":[{"tool_name":"drop","tool_class":"destructive","is_document_op":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if pol := m.Tools[0]; pol.Class != ClassWrite || !pol.Destructive {
		t.Fatalf("policy %+v", pol)
	}
	reg, err := NewRegistry(m)
	if err != nil || !reg.HasWrites() || reg.ClassOf("s", "drop") != ClassWrite {
		t.Fatalf("registry: %v", err)
	}
	_, err = p.Parse("d.json", []byte(`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s",
		"tools":[{"tool_name":"drop","tool_class":"destructive","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/c"]}}]}`))
	if !errors.Is(err, ErrManifest) {
		t.Fatalf("a destructive document op: %v", err)
	}
	c, err := ClassifyTools("cli", "t", map[string]Class{"a": ClassRead, "b": ClassDestructive})
	if err != nil || len(c.Tools) != 2 || !c.Tools[1].Destructive {
		t.Fatalf("ClassifyTools: %+v %v", c, err)
	}
	ext, err := reg.Extend(c)
	if err != nil || ext.Manifests() != 2 || ext.Version() == reg.Version() {
		t.Fatalf("Extend: %v", err)
	}
	if _, err := ext.Extend(c); !errors.Is(err, ErrManifest) {
		t.Fatalf("a second manifest of server t: %v", err)
	}
}
