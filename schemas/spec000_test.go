package schemas

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compile(t *testing.T, name string, src []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(name, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func check(t *testing.T, s *jsonschema.Schema, doc string, valid bool) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); (err == nil) != valid {
		t.Errorf("%s: valid=%v, err %v", doc, valid, err)
	}
}

// TestToolRegistrySchema: the headers and strictness spec 000 §9.2.0
// requires, and its example manifest.
func TestToolRegistrySchema(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(ToolRegistry, &root); err != nil {
		t.Fatal(err)
	}
	props := root["properties"].(map[string]any)
	if props["schema_id"].(map[string]any)["const"] != "talos.mcp.tool_registry" || props["schema_version"].(map[string]any)["const"] != "v1" {
		t.Fatal("schema_id / schema_version consts")
	}
	if root["additionalProperties"] != false || root["unevaluatedProperties"] != false {
		t.Fatal("root strictness")
	}
	s := compile(t, "tool_registry.json", ToolRegistry)
	example := `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"mcp-github","server_version":"1.0.0","tools":[
	 {"tool_name":"create-pr","tool_class":"write","is_document_op":true,"document_spec":{"content_encoding":"utf8",
	  "write_content_pointers":["/body","/files/0/content"],"read_content_pointers":[],"max_read_bytes":10485760,"max_write_bytes":5242880,"max_batch_bytes":52428800}}]}`
	check(t, s, example, true)
	check(t, s, `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[],"x":1}`, false)
	check(t, s, `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[{"tool_name":"t","tool_class":"read","is_document_op":true}]}`, false)
	check(t, s, `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"s","tools":[{"tool_name":"t","tool_class":"read","is_document_op":true,
	  "document_spec":{"content_encoding":"utf8","read_content_pointers":["/content/0/text"],"extra":1}}]}`, false)
}

func TestToolCallAndEffectSchemas(t *testing.T) {
	call := compile(t, "tool_call.json", ToolCall)
	check(t, call, `{"tool_id":"a:b","args":{},"idempotency_key":"k-1","tool_class":"write","content_hash_alg":"sha256",
	 "expected_document_hashes":[{"pointer":"/body","hash":"`+hex64+`"}]}`, true)
	check(t, call, `{"tool_id":"a:b","unknown":1}`, false)
	check(t, call, `{"tool_id":"a:b","content_hash_alg":"md5"}`, false)
	check(t, call, `{"tool_id":"a:b","expected_document_hashes":[{"pointer":"body","hash":"`+hex64+`"}]}`, false)
	effect := compile(t, "tool_effect.json", ToolEffect)
	check(t, effect, `{"effect_id":"01890a5d-ac96-774b-bcce-b302099a8057","document_hashes":[{"pointer":"/body","hash":"`+hex64+`","size_bytes":3}],
	 "batch_total_bytes":3,"content_hash_alg":"sha256","tool_class":"write"}`, true)
	// effect_id must be a UUIDv7.
	check(t, effect, `{"effect_id":"01890a5d-ac96-474b-bcce-b302099a8057","document_hashes":[],"batch_total_bytes":0,"content_hash_alg":"sha256"}`, false)
}

const hex64 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
