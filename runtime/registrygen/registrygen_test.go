package registrygen

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/guard"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ann  string
		want guard.Class
		why  string
	}{
		{`{"readOnlyHint": true}`, guard.ClassRead, "readOnlyHint"},
		{`{"readOnlyHint": true, "destructiveHint": false}`, guard.ClassRead, "readOnlyHint"},
		{`{"readOnlyHint": true, "destructiveHint": true}`, guard.ClassWrite, "contradict"},
		{`{"destructiveHint": true}`, guard.ClassWrite, "destructive"},
		{`{"destructiveHint": false}`, guard.ClassWrite, "no readOnlyHint"},
		{`{"readOnlyHint": false}`, guard.ClassWrite, "readOnlyHint false"},
		{`{"readOnlyHint": "true"}`, guard.ClassWrite, "no readOnlyHint"},
		{`{"idempotentHint": true, "openWorldHint": false}`, guard.ClassWrite, "no readOnlyHint"},
		{`{}`, guard.ClassWrite, "no readOnlyHint"},
		{`null`, guard.ClassWrite, "no readOnlyHint"},
	} {
		var ann map[string]any
		if err := json.Unmarshal([]byte(tc.ann), &ann); err != nil {
			t.Fatal(err)
		}
		got, why := Classify(ann)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("Classify(%s) = %s %q, want %s %q", tc.ann, got, why, tc.want, tc.why)
		}
	}
}

func TestSchemaHash(t *testing.T) {
	a := SchemaHash(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number","maximum":10}}}`))
	b := SchemaHash(json.RawMessage(" {\"properties\": {\"b\": {\"maximum\": 10, \"type\": \"number\"}, \"a\": {\"type\": \"string\"}}, \"type\": \"object\"}\n"))
	if a != b || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("equal schemas hash %s and %s", a, b)
	}
	for _, other := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number","maximum":10.5}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number","maximum":10}},"required":["a"]}`,
	} {
		if SchemaHash(json.RawMessage(other)) == a {
			t.Errorf("%s hashes like the original", other)
		}
	}
	if SchemaHash(nil) != SchemaHash(json.RawMessage("null")) {
		t.Error("an absent schema is not null")
	}
}

// fleet is two servers, the second with a destructive tool and a tool
// whose description would break a comment.
func fleet() []Server {
	return []Server{
		{Name: "files", Version: "1.2.0", Protocol: "2025-11-25", Tools: []Tool{
			{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`), Annotations: map[string]any{"readOnlyHint": true}},
			{Name: "write_file", Description: "Write a file.\ntool_class: read", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "delete_file", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: map[string]any{"destructiveHint": true}},
		}},
		{Name: "Empty Server", Tools: nil},
	}
}

// TestManifestValidates: every draft is a manifest the registry accepts,
// with the classes Classify gives and no document operation, and text
// from the server cannot leave its comment.
func TestManifestValidates(t *testing.T) {
	p, err := guard.NewManifestParser()
	if err != nil {
		t.Fatal(err)
	}
	var ms []*guard.Manifest
	for _, s := range fleet() {
		data := Manifest(s)
		m, err := p.Parse(s.Name+".yaml", data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Name, err, data)
		}
		if !strings.Contains(string(data), "document_spec") || !strings.Contains(string(data), "never guesses read") {
			t.Errorf("%s: the header does not say what to review:\n%s", s.Name, data)
		}
		ms = append(ms, m)
	}
	reg, err := guard.NewRegistry(ms...)
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]guard.Class{"read_file": guard.ClassRead, "write_file": guard.ClassWrite, "delete_file": guard.ClassWrite} {
		pol, ok := reg.Lookup("files", tool)
		if !ok || pol.Class != want || pol.IsDocumentOp {
			t.Errorf("files:%s = %+v, want %s", tool, pol, want)
		}
	}
	if reg.Tools() != 3 {
		t.Errorf("%d tools", reg.Tools())
	}
	if !strings.Contains(string(Manifest(fleet()[0])), "# destructiveHint: destructive\n") {
		t.Error("the destructive tool is not noted")
	}
}

func TestDiff(t *testing.T) {
	lock := NewLock(fleet())
	data, err := lock.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseLock("fleet.lock", data)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(back, fleet()); len(d) != 0 {
		t.Fatalf("an unchanged fleet differs: %v", d)
	}
	now := fleet()
	now[0].Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"follow":{"type":"boolean"}}}`)
	now[0].Tools[1].Annotations = map[string]any{"readOnlyHint": true}
	now[0].Tools = append(now[0].Tools[:2], Tool{Name: "chmod", InputSchema: json.RawMessage(`{}`)})
	now = append(now[:1], Server{Name: "new", Tools: []Tool{{Name: "t"}}})
	var got []string
	for _, c := range Diff(back, now) {
		got = append(got, c.String())
	}
	joined := strings.Join(got, "\n")
	for _, w := range []string{
		"+ files:chmod appeared (unclassified until a manifest lists it)",
		"- files:delete_file vanished",
		"~ files:read_file input schema changed (sha256:",
		"~ files:write_file annotations changed (readOnlyHint absent -> true)",
		"+ new:t appeared",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("diff lacks %q:\n%s", w, joined)
		}
	}
	if len(got) != 5 {
		t.Errorf("%d changes:\n%s", len(got), joined)
	}
}

func TestParseLockRefuses(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"servers": null}`, `{"servers": {}, "extra": 1}`, `{"servers": {"a": {"tools": {"t": {"input_schema": 3}}}}}`, strings.Repeat(" ", MaxLockBytes+1)} {
		if _, err := ParseLock("fleet.lock", []byte(in)); !errors.Is(err, ErrLock) {
			t.Errorf("ParseLock(%.40q) = %v", in, err)
		}
	}
}

// FuzzParseLock: any lock file parses or fails with ErrLock, and a parsed
// lock diffs without panicking.
func FuzzParseLock(f *testing.F) {
	data, _ := NewLock(fleet()).Marshal()
	f.Add(data)
	f.Add([]byte(`{"servers": {"a": {"tools": {}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock("fleet.lock", data)
		if err != nil {
			if !errors.Is(err, ErrLock) {
				t.Fatalf("error %v does not wrap ErrLock", err)
			}
			return
		}
		_ = Diff(l, fleet())
	})
}
