package runtime

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCapabilityMeta(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meta      mcp.Meta
		code      string
		presented bool
	}{
		{"none", nil, "", false},
		{"token and proof", mcp.Meta{MetaCapability: "t", MetaCapabilityProof: "p"}, "", true},
		{"token only", mcp.Meta{MetaCapability: "t"}, "", true},
		{"not a string", mcp.Meta{MetaCapability: 42}, CodeArgsInvalid, false},
		{"proof not a string", mcp.Meta{MetaCapabilityProof: []any{"x"}}, CodeArgsInvalid, false},
		{"oversized token", mcp.Meta{MetaCapability: strings.Repeat("a", 16<<10+1)}, CodeArgsInvalid, false},
		{"oversized proof", mcp.Meta{MetaCapabilityProof: strings.Repeat("a", 4<<10+1)}, CodeArgsInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a executeArgs
			e := capabilityMeta(tc.meta, &a)
			switch {
			case tc.code == "" && e != nil:
				t.Fatalf("refused: %v", e)
			case tc.code != "" && (e == nil || e.Code != tc.code):
				t.Fatalf("got %v, want %s", e, tc.code)
			case tc.code == "" && a.capPresented != tc.presented:
				t.Fatalf("presented %v", a.capPresented)
			}
		})
	}
}

func TestRequestFingerprint(t *testing.T) {
	a := &capRequest{Duration: 60, MaxUses: 2}
	l1, f1 := requestFingerprint([]string{"x:a", "x:b"}, a, "jkt1", "")
	l2, f2 := requestFingerprint([]string{"x:a", "x:b"}, a, "jkt1", "")
	_, f3 := requestFingerprint([]string{"x:a", "x:b"}, a, "jkt2", "")
	if l1 != l2 || f1 != f2 || f1 == f3 || l1 != "capability:x:a,x:b" {
		t.Fatalf("%s %s %s %s", l1, f1, f2, f3)
	}
	long := make([]string, 64)
	for i := range long {
		long[i] = "namespace:" + strings.Repeat("t", 40)
	}
	if l, _ := requestFingerprint(long, a, "j", ""); len(l) > 210 {
		t.Fatalf("label of %d bytes", len(l))
	}
}
