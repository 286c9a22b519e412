package guard

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// FuzzResolve: pointer parsing and extraction never panic, reject only
// with the two sentinel errors, and a pointer built from tokens finds what
// it names.
func FuzzResolve(f *testing.F) {
	for _, s := range []struct{ doc, ptr string }{
		{`{"a":{"b":["x","y"]}}`, "/a/b/1"},
		{`{"a/b":{"m~n":"v"}}`, "/a~1b/m~0n"},
		{`["x"]`, "/0"},
		{`{"":1}`, "/"},
		{`[1,2]`, "/01"},
		{`{"a":1}`, "/a~"},
		{`null`, ""},
	} {
		f.Add(s.doc, s.ptr)
	}
	f.Fuzz(func(t *testing.T, doc, ptr string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		got, err := Resolve(v, ptr)
		if err != nil {
			if !errors.Is(err, ErrPointerSyntax) && !errors.Is(err, ErrPointerNotFound) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if toks, err := ParsePointer(ptr); err != nil || (len(toks) == 0) != (ptr == "") {
			t.Fatalf("resolved %q but it does not parse: %v", ptr, err)
		}
		// Extraction of whatever was found behaves.
		if _, e := DecodeContent(got, ptr, EncodingUTF8, 1<<20); e != nil && e.Code != codes.DocContentPointerInvalid && e.Code != codes.DocSizeExceeded && e.Code != codes.DocEncodingInvalid {
			t.Fatalf("code %s", e.Code)
		}
	})
}

// FuzzBase64: the decoding path agrees with the standard library's strict
// decoder (minus line breaks, which it refuses), and its size precheck is
// exact.
func FuzzBase64(f *testing.F) {
	for _, s := range []string{"", "aGk=", "aGk", "aGl=", "aGVsbG8=", "aGVs\nbG8=", "====", "-_", "AAAA", "YQ=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, e := DecodeContent(s, "/p", EncodingBase64, 1<<20)
		want, werr := base64.StdEncoding.Strict().DecodeString(s)
		if e != nil {
			switch e.Code {
			case codes.DocEncodingInvalid:
				// Refused: either the standard decoder refuses too, or s
				// has a line break it would have skipped.
				if werr == nil && !containsLineBreak(s) {
					t.Fatalf("%q refused, the standard decoder accepts it", s)
				}
			case codes.DocSizeExceeded:
				if len(s) <= 1<<20 {
					t.Fatalf("%q: size exceeded", s)
				}
			default:
				t.Fatalf("%q: code %s", s, e.Code)
			}
			return
		}
		if werr != nil || string(b) != string(want) {
			t.Fatalf("%q decoded to %q, standard %q (%v)", s, b, want, werr)
		}
		if n, err := base64Size(s); err != nil || n != int64(len(b)) {
			t.Fatalf("%q: precheck size %d, decoded %d", s, n, len(b))
		}
		// The limit is exact.
		if len(b) > 0 {
			if _, e := DecodeContent(s, "/p", EncodingBase64, int64(len(b)-1)); e == nil || e.Code != codes.DocSizeExceeded {
				t.Fatalf("%q: limit %d not enforced", s, len(b)-1)
			}
		}
	})
}

func containsLineBreak(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return true
		}
	}
	return false
}

// FuzzManifest: manifest parsing never panics; whatever it accepts builds a
// registry whose version is stable across a re-parse of the canonical form.
func FuzzManifest(f *testing.F) {
	f.Add(githubManifest, false)
	f.Add(githubYAML, true)
	f.Add(docsManifest, false)
	f.Add(`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[]}`, false)
	f.Add("schema_id: talos.mcp.tool_registry\nschema_version: v1\nserver_id: s\ntools: []\n", true)
	f.Add(`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[{"tool_name":"t","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8","write_content_pointers":["/a"],"max_write_bytes":1e300}}]}`, false)
	p := mustParser(f)
	f.Fuzz(func(t *testing.T, src string, asYAML bool) {
		name := "m.json"
		if asYAML {
			name = "m.yaml"
		}
		m, err := p.Parse(name, []byte(src))
		if err != nil {
			if !errors.Is(err, ErrManifest) {
				t.Fatalf("error %v does not wrap ErrManifest", err)
			}
			return
		}
		r, err := NewRegistry(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := p.Parse("again.json", m.canonical)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		r2, _ := NewRegistry(again)
		if r.Version() != r2.Version() {
			t.Fatal("canonical form changes the version")
		}
		for _, tool := range m.Tools {
			if tool.Class != ClassRead && tool.Class != ClassWrite {
				t.Fatalf("class %q", tool.Class)
			}
			if tool.IsDocumentOp != (tool.Document != nil) {
				t.Fatal("document spec without a document op")
			}
			if d := tool.Document; d != nil && (d.MaxReadBytes < 1 || d.MaxWriteBytes < 1 || d.MaxBatchBytes < 1) {
				t.Fatal("limit below 1")
			}
		}
	})
}
