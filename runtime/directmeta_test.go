package runtime

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestDirectMeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		meta    mcp.Meta
		key     string // "" for none
		hashes  int
		invalid bool
	}{
		{"none", nil, "", 0, false},
		{"other keys are ignored", mcp.Meta{"progressToken": 3, "x": "y"}, "", 0, false},
		{"key", mcp.Meta{MetaIdempotencyKey: "k-1"}, "k-1", 0, false},
		{"key and hashes", mcp.Meta{MetaIdempotencyKey: "k-2", MetaExpectedDocumentHashes: []any{
			map[string]any{"pointer": "/content", "hash": "sha256:00"}}}, "k-2", 1, false},
		{"key not a string", mcp.Meta{MetaIdempotencyKey: 7}, "", 0, true},
		{"hashes not a list", mcp.Meta{MetaExpectedDocumentHashes: "sha256:00"}, "", 0, true},
		{"hash entry not an object", mcp.Meta{MetaExpectedDocumentHashes: []any{"x"}}, "", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var a executeArgs
			e := directMeta(tc.meta, &a)
			if tc.invalid {
				if e == nil || e.Code != CodeArgsInvalid {
					t.Fatalf("error %v, want %s", e, CodeArgsInvalid)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			got := ""
			if a.IdempotencyKey != nil {
				got = *a.IdempotencyKey
			}
			if got != tc.key || len(a.ExpectedDocumentHashes) != tc.hashes {
				t.Fatalf("key %q, %d hashes; want %q, %d", got, len(a.ExpectedDocumentHashes), tc.key, tc.hashes)
			}
		})
	}
}

func TestScrubMeta(t *testing.T) {
	t.Parallel()
	in := mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "up"}, "dev.example/keep": 1}
	out := scrubMeta(in)
	if len(out) != 1 || out["dev.example/keep"] != 1 {
		t.Fatalf("scrubMeta = %v", out)
	}
	if len(in) != 2 {
		t.Fatal("scrubMeta changed its input")
	}
	if scrubMeta(mcp.Meta{"io.modelcontextprotocol/x": 1}) != nil {
		t.Fatal("only reserved keys should give no _meta at all")
	}
}
