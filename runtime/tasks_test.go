package runtime

import (
	"encoding/json"
	"testing"
)

func TestUpstreamCaps(t *testing.T) {
	caps := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name       string
		c          *caller
		declares   bool
		wantUpCaps string
	}{
		{"no caller", nil, false, "null"},
		{"session", &caller{capsMeta: caps(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}, false,
			`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"declared, not offered", &caller{sessionless: true, capsMeta: caps(`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}, true,
			`{"elicitation":{}}`},
		{"declared beside another extension", &caller{sessionless: true, capsMeta: caps(`{"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{"a":1}}}`)}, true,
			`{"extensions":{"x/y":{"a":1}}}`},
		{"declared and offered", &caller{sessionless: true, offerTask: true, capsMeta: caps(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}, true,
			`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"not declared", &caller{sessionless: true, capsMeta: caps(`{"sampling":{}}`)}, false, `{"sampling":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.declaresTasks(); got != tc.declares {
				t.Errorf("declaresTasks = %v, want %v", got, tc.declares)
			}
			var up any
			if tc.c != nil {
				up = tc.c.upstreamCaps()
			}
			b, _ := json.Marshal(up)
			if string(b) != tc.wantUpCaps {
				t.Errorf("upstreamCaps = %s, want %s", b, tc.wantUpCaps)
			}
		})
	}
}
