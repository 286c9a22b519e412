package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/argguard"
)

func TestPreflight(t *testing.T) {
	deep := strings.Repeat(`{"a":`, argguard.MaxDepth+1) + `1` + strings.Repeat(`}`, argguard.MaxDepth+1)
	wide := `{"a":[` + strings.TrimSuffix(strings.Repeat(`0,`, argguard.MaxNodes+1), ",") + `]}`
	cases := []struct {
		name, raw string
		ok        bool
	}{
		{"small", `{"a":1,"b":[1,2,{"c":"x"}]}`, true},
		{"at depth limit", strings.Repeat(`{"a":`, argguard.MaxDepth) + `1` + strings.Repeat(`}`, argguard.MaxDepth), true},
		{"too deep", deep, false},
		{"too many values", wide, false},
		{"long string", `{"s":"` + strings.Repeat("x", argguard.MaxString+1) + `"}`, false},
		{"long key", `{"` + strings.Repeat("k", argguard.MaxKeyLen+1) + `":1}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, e := decodeToolArgs(json.RawMessage(tc.raw))
			if (e == nil) != tc.ok {
				t.Fatalf("err = %v", e)
			}
			if e != nil && (e.Code != CodeArgsInvalid || args != nil) {
				t.Fatalf("got %v, %v", args, e)
			}
		})
	}
}
