package guard

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// docsManifest classifies the tools of server "docs".
const docsManifest = `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"docs","tools":[
 {"tool_name":"put","tool_class":"write","is_document_op":true,
  "document_spec":{"content_encoding":"utf8","write_content_pointers":["/body"],"max_write_bytes":8,"max_batch_bytes":8}},
 {"tool_name":"put64","tool_class":"write","is_document_op":true,
  "document_spec":{"content_encoding":"base64","write_content_pointers":["/data"]}},
 {"tool_name":"get","tool_class":"read","is_document_op":true,
  "document_spec":{"content_encoding":"utf8","read_content_pointers":["/content/0/text"],"max_read_bytes":4}},
 {"tool_name":"ping","tool_class":"write","is_document_op":false},
 {"tool_name":"list","tool_class":"read","is_document_op":false}]}`

func docsRegistry(t testing.TB) *Registry {
	t.Helper()
	r, err := NewRegistry(mustManifest(t, docsManifest, "docs.json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// judge runs both layers the way the runtime does, returning the first
// refusal's code ("" when admitted).
func judge(g *Gate, c *Connector, call *Call) (Admission, string) {
	d, checks := g.Check(call)
	if e := FirstFailure(checks); e != nil {
		return Admission{}, e.Code
	}
	a, checks := c.Admit(call, d)
	if e := FirstFailure(checks); e != nil {
		return a, e.Code
	}
	return a, ""
}

func TestGuards(t *testing.T) {
	reg := docsRegistry(t)
	b64 := base64.StdEncoding.EncodeToString([]byte("bytes"))
	cases := []struct {
		name string
		env  Environment
		call Call
		code string
	}{
		{"read tool", EnvProd, Call{ServerID: "docs", ToolName: "list"}, ""},
		{"unclassified in prod", EnvProd, Call{ServerID: "docs", ToolName: "nope"}, codes.ToolUnclassifiedDenied},
		{"unclassified server in prod", EnvProd, Call{ServerID: "other", ToolName: "list"}, codes.ToolUnclassifiedDenied},
		{"unclassified in dev", EnvDev, Call{ServerID: "docs", ToolName: "nope"}, ""},
		{"unclassified in dev, read-only caller", EnvDev, Call{ServerID: "docs", ToolName: "nope", ReadOnly: true}, codes.ToolClassMismatch},
		{"declared read of a write", EnvProd, Call{ServerID: "docs", ToolName: "ping", DeclaredClass: ClassRead, IdempotencyKey: "k"}, codes.ToolClassDeclarationMismatch},
		{"declared write of a read", EnvProd, Call{ServerID: "docs", ToolName: "list", DeclaredClass: ClassWrite}, codes.ToolClassDeclarationMismatch},
		{"declared correctly", EnvProd, Call{ServerID: "docs", ToolName: "list", DeclaredClass: ClassRead}, ""},
		{"declared, unclassified in dev", EnvDev, Call{ServerID: "docs", ToolName: "nope", DeclaredClass: ClassRead}, ""},
		{"read-only caller, write tool", EnvProd, Call{ServerID: "docs", ToolName: "ping", ReadOnly: true, IdempotencyKey: "k"}, codes.ToolClassMismatch},
		{"read-only caller, read tool", EnvProd, Call{ServerID: "docs", ToolName: "list", ReadOnly: true}, ""},
		{"write without key", EnvProd, Call{ServerID: "docs", ToolName: "ping"}, codes.IdempotencyKeyRequired},
		{"write with key", EnvProd, Call{ServerID: "docs", ToolName: "ping", IdempotencyKey: "k"}, ""},
		{"document", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "12345678"}}, ""},
		{"document too large", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "123456789"}}, codes.DocSizeExceeded},
		{"document missing", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{}}, codes.DocContentPointerInvalid},
		{"document not a string", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": []any{"x"}}}, codes.DocContentPointerInvalid},
		{"expected hash", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "hello"},
			ExpectedHashes: []ExpectedHash{{"/body", sha("hello")}}}, ""},
		{"expected hash mismatch", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "hello"},
			ExpectedHashes: []ExpectedHash{{"/body", sha("hellO")}}}, codes.DocHashMismatch},
		{"expected hash of another pointer", EnvProd, Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "hello"},
			ExpectedHashes: []ExpectedHash{{"/title", sha("hello")}}}, codes.DocContentPointerInvalid},
		{"expected hash on a non-document tool", EnvProd, Call{ServerID: "docs", ToolName: "ping", IdempotencyKey: "k",
			ExpectedHashes: []ExpectedHash{{"/body", sha("")}}}, codes.DocContentPointerInvalid},
		{"base64 document", EnvProd, Call{ServerID: "docs", ToolName: "put64", IdempotencyKey: "k", Args: map[string]any{"data": b64},
			ExpectedHashes: []ExpectedHash{{"/data", sha("bytes")}}}, ""},
		{"base64 invalid", EnvProd, Call{ServerID: "docs", ToolName: "put64", IdempotencyKey: "k", Args: map[string]any{"data": "not base64!"}}, codes.DocEncodingInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := tc.call
			_, code := judge(NewGate(reg, tc.env), NewConnector(reg, tc.env), &call)
			if code != tc.code {
				t.Fatalf("got %q, want %q", code, tc.code)
			}
		})
	}
}

func TestAdmissionHashes(t *testing.T) {
	reg := docsRegistry(t)
	call := &Call{ServerID: "docs", ToolName: "put", IdempotencyKey: "k", Args: map[string]any{"body": "hi"}}
	a, code := judge(NewGate(reg, EnvProd), NewConnector(reg, EnvProd), call)
	if code != "" || a.Class != ClassWrite || a.BatchBytes != 2 || len(a.Documents) != 1 || a.Documents[0].Hash != sha("hi") {
		t.Fatalf("%+v %q", a, code)
	}
	if a.RegistryVersion != reg.Version() {
		t.Fatal("admission without the registry version")
	}
}

// TestRegistryParity: a front door judging by another registry than the
// connector's pin is refused, whatever it decided.
func TestRegistryParity(t *testing.T) {
	pinned := docsRegistry(t)
	// The registry on disk changed: ping became read, so the front door
	// would let a keyless call through.
	tampered, err := NewRegistry(mustManifest(t, strings.Replace(docsManifest, `"ping","tool_class":"write"`, `"ping","tool_class":"read"`, 1), "docs.json"))
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{ServerID: "docs", ToolName: "ping"}
	d, checks := NewGate(tampered, EnvProd).Check(call)
	if FirstFailure(checks) != nil {
		t.Fatal("the tampered front door refused")
	}
	_, checks = NewConnector(pinned, EnvProd).Admit(call, d)
	e := FirstFailure(checks)
	if e == nil || e.Code != codes.RegistryVersionMismatch || e.Details["connector_version"] != pinned.Version() || e.Details["gateway_version"] != tampered.Version() {
		t.Fatalf("got %+v", e)
	}
	// A registry that failed to load refuses at the front door already.
	_, checks = UnavailableGate(EnvProd).Check(call)
	if e := FirstFailure(checks); e == nil || e.Code != codes.RegistryVersionMismatch {
		t.Fatalf("unavailable gate: %v", e)
	}
	// Verify catches an admission made under another version.
	a := &Admission{Decision: Decision{RegistryVersion: tampered.Version()}}
	if e := NewConnector(pinned, EnvProd).Verify(a); e == nil || e.Code != codes.RegistryVersionMismatch {
		t.Fatalf("verify: %v", e)
	}
}

func TestCheckResult(t *testing.T) {
	reg := docsRegistry(t)
	c := NewConnector(reg, EnvProd)
	a, code := judge(NewGate(reg, EnvProd), c, &Call{ServerID: "docs", ToolName: "get"})
	if code != "" {
		t.Fatal(code)
	}
	ok := decode(t, `{"content":[{"type":"text","text":"abcd"}]}`)
	docs, n, e := c.CheckResult(&a, ok)
	if e != nil || n != 4 || docs[0].Hash != sha("abcd") {
		t.Fatalf("%v %d %v", docs, n, e)
	}
	for doc, code := range map[string]string{
		`{"content":[{"type":"text","text":"abcde"}]}`: codes.DocSizeExceeded,
		`{"content":[]}`: codes.DocContentPointerInvalid,
		`{"content":[{"type":"image","data":"x"}]}`: codes.DocContentPointerInvalid,
	} {
		if _, _, e := c.CheckResult(&a, decode(t, doc)); e == nil || e.Code != code {
			t.Errorf("%s: %v, want %s", doc, e, code)
		}
	}
	// A tool without read pointers has nothing to check.
	b, _ := judge(NewGate(reg, EnvProd), c, &Call{ServerID: "docs", ToolName: "list"})
	if docs, _, e := c.CheckResult(&b, ok); e != nil || docs != nil {
		t.Fatalf("list: %v %v", docs, e)
	}
}

// TestDryRunSeesEveryCheck: the front door reports every check, not only
// the first failure.
func TestDryRunSeesEveryCheck(t *testing.T) {
	reg := docsRegistry(t)
	_, checks := NewGate(reg, EnvProd).Check(&Call{ServerID: "docs", ToolName: "ping", DeclaredClass: ClassRead, ReadOnly: true})
	var names, failed []string
	for _, c := range checks {
		names = append(names, c.Name)
		if c.Err != nil {
			failed = append(failed, c.Err.Code)
		}
	}
	if strings.Join(names, ",") != "registry_classification,tool_class_declaration,read_only_capability,idempotency_key" {
		t.Fatalf("checks %v", names)
	}
	if strings.Join(failed, ",") != codes.ToolClassDeclarationMismatch+","+codes.ToolClassMismatch+","+codes.IdempotencyKeyRequired {
		t.Fatalf("failed %v", failed)
	}
}

// TestGateHides: prod hides exactly the tools whose calls the gate refuses
// as unclassified; dev and a registry that failed to load hide nothing.
func TestGateHides(t *testing.T) {
	reg := docsRegistry(t)
	cases := []struct {
		name         string
		gate         *Gate
		server, tool string
		want         bool
	}{
		{"classified in prod", NewGate(reg, EnvProd), "docs", "list", false},
		{"unclassified tool in prod", NewGate(reg, EnvProd), "docs", "nope", true},
		{"unclassified server in prod", NewGate(reg, EnvProd), "other", "list", true},
		{"empty registry in prod", NewGate(nil, EnvProd), "docs", "list", true},
		{"unclassified in dev", NewGate(reg, EnvDev), "docs", "nope", false},
		{"unavailable registry", UnavailableGate(EnvProd), "docs", "nope", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.gate.Hides(tc.server, tc.tool); got != tc.want {
				t.Fatalf("Hides(%s, %s) = %v, want %v", tc.server, tc.tool, got, tc.want)
			}
			// Hiding agrees with the gate's own verdict on a call.
			_, checks := tc.gate.Check(&Call{ServerID: tc.server, ToolName: tc.tool})
			refused := FirstFailure(checks) != nil && FirstFailure(checks).Code == codes.ToolUnclassifiedDenied
			if tc.want != refused {
				t.Fatalf("hidden %v, refused as unclassified %v", tc.want, refused)
			}
		})
	}
}
