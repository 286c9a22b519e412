package config

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/schemas"
	yaml "go.yaml.in/yaml/v3"
)

// schemaKeys walks the config schema and returns the key paths it defines
// ("upstreams[].credentials.bearer_env"), checking on the way that every
// property has a description and every object is closed.
func schemaKeys(t *testing.T) map[string]bool {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(schemas.Config, &root); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"$schema", "$id", "title", "description"} {
		if root[k] == nil {
			t.Errorf("schema lacks %s", k)
		}
	}
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			cur := any(root)
			for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				cur = cur.(map[string]any)[tok]
			}
			s = cur.(map[string]any)
		}
	}
	keys := map[string]bool{}
	var walk func(s map[string]any, path string)
	walk = func(s map[string]any, path string) {
		s = resolve(s)
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, path+"[]")
		}
		if alts, ok := s["oneOf"].([]any); ok {
			for _, a := range alts {
				walk(a.(map[string]any), path)
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			// A map: its keys are data.
			keys[path+".*"] = true
			walk(ap, path+".*")
		}
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return
		}
		if _, ok := s["additionalProperties"]; !ok {
			t.Errorf("%s: object without additionalProperties", path)
		}
		for name, p := range props {
			ps := p.(map[string]any)
			kp := strings.TrimPrefix(path+"."+name, ".")
			if d, _ := ps["description"].(string); d == "" {
				t.Errorf("%s: no description", kp)
			}
			keys[kp] = true
			walk(ps, kp)
		}
	}
	walk(root, "")
	return keys
}

// isMapPath reports whether the keys of the setting at path are data.
func isMapPath(path string) bool {
	switch path {
	case "rate_limits", "principals", "upstreams[].env", "upstreams[].credentials.headers_env", "upstreams[].output_policies", "upstreams[].output_policies.*":
		return true
	}
	return false
}

// valueKeys returns the key paths present in a decoded document, with the
// keys of maps written as "*".
func valueKeys(v any, path string, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if isMapPath(path) {
				k = "*"
			}
			kp := strings.TrimPrefix(path+"."+k, ".")
			into[kp] = true
			valueKeys(c, kp, into)
		}
	case []any:
		for _, c := range x {
			valueKeys(c, path+"[]", into)
		}
	}
}

// TestSchemaMatchesStructs checks that the effective settings of the full
// example use every key the schema defines, and no other: the schema and
// the Go types describe the same file.
func TestSchemaMatchesStructs(t *testing.T) {
	fixedEnv(t)
	want := schemaKeys(t)
	delete(want, "$schema")
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	valueKeys(doc, "", got)
	if len(want) < 60 {
		t.Fatalf("only %d schema keys found", len(want))
	}
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		// auth.local.claims is free-form: its keys are the operator's.
		if !want[k] && !strings.HasPrefix(k, "auth.local.claims.") {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("schema keys not in the effective settings: %v\neffective keys not in the schema: %v", missing, extra)
	}
}
