package catalog

import (
	"errors"
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"{\"server\":\"a\",\"name\":\"x\",\"inputSchema\":{\"type\":\"object\"}}\n{\"name\":\"y\"}",
		`{"tools":[{"name":"x","inputSchema":{"$ref":"#/$defs/a","$defs":{"a":{}}}}]}`,
		`{"tools":[],"resources":[{"uri":"a:b"}],"prompts":[{"name":"p","arguments":[{"name":"q"}]}]}`,
		`[{"name":"x"}]`, `{"name":1}`, `{`, "", "\ufeff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := Decode("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		snap, _, err := Ingest(src, Options{Cards: cards(t)})
		if err != nil {
			t.Fatalf("lenient ingest failed: %v", err)
		}
		for _, it := range snap.All() {
			if _, err := snap.Hydrate(it.ID); err != nil {
				t.Fatalf("hydrate %s: %v", it.ID, err)
			}
			if it.Kind == "tool" {
				_ = it.ValidateArgs(map[string]any{"a": 1.0})
			}
		}
	})
}
