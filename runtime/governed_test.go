package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// toolID returns the id of server's tool name in rt's catalog.
func toolID(t *testing.T, rt *Runtime, server, name string) string {
	t.Helper()
	for _, it := range rt.Snapshot().Items("tool") {
		if it.Server == server && it.UpstreamName == name {
			return it.ID
		}
	}
	t.Fatalf("no tool %s/%s", server, name)
	return ""
}

// toolReceipts flushes rt's receipts and returns those of tool_execute
// calls of tool id.
func toolReceipts(t *testing.T, rt *Runtime, dir, id string) []receipts.Receipt {
	t.Helper()
	if err := rt.rec.out.Flush(); err != nil {
		t.Fatal(err)
	}
	var out []receipts.Receipt
	err := receipts.Reader{Dir: filepath.Join(dir, receipts.DirName)}.Query(context.Background(), receipts.Filter{ToolID: id, Method: "tools/call:" + ToolExecute}, func(r receipts.Receipt) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const secretSSN = "123-45-6789"

// crmUpstream is a static upstream whose customer tool answers with
// personal data and a large note (so that the firewall stores artifacts),
// and whose count tool breaks its own outputSchema.
func crmUpstream() testUpstream {
	note := strings.Repeat("lorem ipsum dolor sit amet ", 400)
	customer, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{
		"customer": map[string]any{"name": "Ada Lovelace", "email": "ada@example.com", "ssn": secretSSN},
		"note":     note,
	}, "content": []any{map[string]any{"type": "text", "text": "ssn " + secretSSN + " " + note}}})
	bad, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{"n": "not a number " + secretSSN},
		"content": []any{map[string]any{"type": "text", "text": "n"}}})
	src := catalog.Source{Tools: []catalog.ToolDef{
		{Name: "get_customer", Description: "A customer.", InputSchema: json.RawMessage(`{"type":"object"}`), Result: customer},
		{Name: "count", Description: "A count.", InputSchema: json.RawMessage(`{"type":"object"}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`), Result: bad},
	}}
	u := newUpstream("crm")
	u.OutputPolicies = map[string]map[string]string{"get_*": {"customer.name": "allow", "customer.email": "mask", "note": "allow"}}
	return testUpstream{cfg: u, src: &src}
}

// TestOutputPolicyBeforeFirewall: the policy applies to structured
// content and content before the firewall stores anything, so a redacted
// value is not readable through tool_view, and the receipt lists the
// redacted paths.
func TestOutputPolicyBeforeFirewall(t *testing.T) {
	dir := t.TempDir()
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{crmUpstream()}, func(r *rig) { r.cfg.StateDir = dir }))
	id := toolID(t, rt, "crm", "get_customer")
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{}})
	if res.IsError {
		t.Fatalf("execute: %v", env)
	}
	whole, _ := json.Marshal(res)
	if strings.Contains(string(whole), secretSSN) || strings.Contains(string(whole), "ada@example.com") {
		t.Fatalf("a redacted value reached the caller: %s", whole)
	}
	fw, _ := env["firewall"].(map[string]any)
	arts, _ := env["artifacts"].([]any)
	if fw["triggered"] != true || len(arts) == 0 {
		t.Fatalf("the firewall kept nothing out of the context: %s", whole)
	}
	for _, a := range arts {
		h := a.(map[string]any)["handle"]
		for _, sel := range []map[string]any{
			{"grep": map[string]any{"pattern": "123", "max_matches": 10}},
			{"head": map[string]any{"chars": 100000}},
			{"json_pointer": map[string]any{"pointer": "/customer"}},
		} {
			out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolView, Arguments: map[string]any{"handle": h, "selector": sel}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(out)
			if strings.Contains(string(b), secretSSN) || strings.Contains(string(b), "ada@example.com") {
				t.Fatalf("tool_view %v shows a redacted value: %s", sel, b)
			}
			if sel["json_pointer"] != nil && !out.IsError && !strings.Contains(string(b), "a***m") {
				t.Errorf("the masked email is not in the stored customer: %s", b)
			}
		}
	}
	rs := toolReceipts(t, rt, dir, id)
	if len(rs) != 1 || rs[0].Tool == nil {
		t.Fatalf("receipts %+v", rs)
	}
	tr := rs[0].Tool
	if strings.Join(tr.RedactedPaths, ",") != "customer.email,customer.ssn" || len(tr.OutputSHA256) != 64 || tr.Class != "unclassified" || tr.DenialStage != "" {
		t.Errorf("receipt tool section %+v", tr)
	}
}

// TestOutputValidation: a result that breaks its outputSchema is withheld
// with OUTPUT_INVALID and receipted at the output stage.
func TestOutputValidation(t *testing.T) {
	dir := t.TempDir()
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{crmUpstream()}, func(r *rig) { r.cfg.StateDir = dir }))
	id := toolID(t, rt, "crm", "count")
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{}}, codes.OutputInvalid)
	if b, _ := json.Marshal(m); strings.Contains(string(b), secretSSN) {
		t.Fatalf("the bad data reached the caller: %s", b)
	}
	rs := toolReceipts(t, rt, dir, id)
	if len(rs) != 1 || rs[0].Tool == nil || rs[0].Tool.DenialStage != receipts.StageOutput || rs[0].Outcome.ErrorCode != codes.OutputInvalid ||
		rs[0].Decision.Result != "allow" {
		t.Fatalf("receipts %+v", rs)
	}
}

// writeManifest writes a cli tool manifest into dir.
func writeManifest(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cliRig is a gateway with a cli upstream "tools" of an echo tool, a
// cat tool over a work directory, and a destructive rm tool with an
// elevation rule; the local principal "tester" holds perms.
func cliRig(t *testing.T, perms ...string) (*Runtime, *mcp.ClientSession, string, string) {
	t.Helper()
	dir, state, work := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, "echo", `name: echo_message
description: Echo a message.
class: read
permissions: [demo:read]
input:
  type: object
  properties: {message: {type: string, maxLength: 200}}
  required: [message]
  additionalProperties: false
command: echo
args: [{arg: message}]
output: {parser: lines}
output_schema: {type: object, properties: {lines: {type: array, items: {type: string}}}, required: [lines]}
`)
	writeManifest(t, dir, "cat", `name: read_file
description: Read a file of the work directory.
class: read
permissions: [demo:read]
input:
  type: object
  properties: {file: {type: string, pattern: "^[A-Za-z0-9_.-]+$"}}
  required: [file]
  additionalProperties: false
command: cat
args: ["--", {arg: file}]
cwd: `+work+`
`)
	writeManifest(t, dir, "rm", `name: remove_file
description: Remove a file of the work directory.
class: destructive
permissions: [demo:write]
elevated: {if: {force: true}, permissions: [demo:admin]}
input:
  type: object
  properties: {file: {type: string, pattern: "^[A-Za-z0-9_.-]+$"}, force: {type: boolean}}
  required: [file]
  additionalProperties: false
command: rm
args: [{flag: "-f", if: force}, "--", {arg: file}]
cwd: `+work+`
`)
	u := newUpstream("tools")
	u.CLI = &config.CLI{Manifests: []string{filepath.Join(dir, "*.yaml")}, AllowedCommands: []string{"echo", "cat", "rm"}}
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{{cfg: u}}, func(r *rig) {
		r.cfg.StateDir = state
		r.cfg.Auth.Local.Sub = "tester"
		r.cfg.Principals = map[string]config.Principal{"tester": {Permissions: perms}}
	}))
	return rt, cs, state, work
}

func TestCLIUpstream(t *testing.T) {
	rt, cs, state, work := cliRig(t, "demo:read", "demo:write")
	echo := toolID(t, rt, "tools", "echo_message")
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"message": "hi $(id) *"}})
	if res.IsError || !strings.Contains(mustJSON(env), `hi $(id) *`) {
		t.Fatalf("echo: %v", env)
	}
	// Option injection is refused before anything runs.
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"message": "--help"}}, codes.CliArgRefused)
	if m["path"] != "args/message" {
		t.Errorf("refusal path %v", m["path"])
	}
	// Schema validation first: a value the schema refuses never reaches
	// the template.
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"message": "x", "extra": 1}}, codes.ArgsInvalid)
	cat := toolID(t, rt, "tools", "read_file")
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": cat, "args": map[string]any{"file": "../../etc/passwd"}}, codes.ArgsInvalid)
	res, env = call(t, cs, ToolExecute, map[string]any{"tool_id": cat, "args": map[string]any{"file": "missing.txt"}})
	if !res.IsError {
		t.Fatalf("cat of a missing file: %v", env)
	}

	// The destructive tool: a write for spec 000's guards (an idempotency
	// key), and allow_destructive for the permission engine.
	rm := toolID(t, rt, "tools", "remove_file")
	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": rm})
	if cls, _ := h["classification"].(map[string]any); cls["tool_class"] != "write" || cls["destructive"] != true || mustJSON(cls["permissions"]) != `["demo:write"]` {
		t.Errorf("hydrated classification %v", cls)
	}
	m = wantError(t, cs, ToolExecute, map[string]any{"tool_id": rm, "args": map[string]any{"file": "a.txt"}, "idempotency_key": "k1"}, codes.PermissionMissing)
	if mustJSON(m["details"].(map[string]any)["missing"]) != `["allow_destructive"]` {
		t.Errorf("missing %v", m["details"])
	}
	if _, err := os.Stat(filepath.Join(work, "a.txt")); err != nil {
		t.Fatal("a refused destructive call removed the file")
	}

	rs := toolReceipts(t, rt, state, rm)
	if len(rs) != 1 || rs[0].Tool == nil || rs[0].Tool.Class != "destructive" || rs[0].Tool.DenialStage != receipts.StagePermission {
		t.Fatalf("rm receipts %+v", rs)
	}
	rs = toolReceipts(t, rt, state, echo)
	stages := []string{}
	for _, r := range rs {
		stages = append(stages, r.Tool.Class+"/"+r.Tool.DenialStage)
	}
	if strings.Join(stages, " ") != "read/ read/validation read/validation" {
		t.Errorf("echo receipts %v", stages)
	}
}

func TestCLIDestructiveAndElevation(t *testing.T) {
	rt, cs, _, work := cliRig(t, "demo:write", "allow_destructive")
	rm := toolID(t, rt, "tools", "remove_file")
	// Elevated: force needs demo:admin.
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": rm, "args": map[string]any{"file": "a.txt", "force": true}, "idempotency_key": "k1"}, codes.PermissionMissing)
	if mustJSON(m["details"]) != `{"elevated":true,"missing":["demo:admin"],"tool_id":"`+rm+`"}` {
		t.Errorf("details %s", mustJSON(m["details"]))
	}
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": rm, "args": map[string]any{"file": "a.txt"}}, codes.IdempotencyKeyRequired)
	res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": rm, "args": map[string]any{"file": "a.txt"}, "idempotency_key": "k2"})
	if res.IsError {
		t.Fatalf("rm: %v", env)
	}
	if _, err := os.Stat(filepath.Join(work, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("the file is still there: %v", err)
	}
	// Read tools need their own permission.
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": toolID(t, rt, "tools", "echo_message"), "args": map[string]any{"message": "x"}}, codes.PermissionMissing)
}

func TestCLIManifestErrorsAtStart(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "rm", "name: rm\ndescription: d\nclass: read\npermissions: [x]\ninput: {type: object, additionalProperties: false}\ncommand: rm\n")
	u := newUpstream("tools")
	u.CLI = &config.CLI{Manifests: []string{filepath.Join(dir, "*.yaml")}, AllowedCommands: []string{"ls"}}
	rg := setup(t, config.ModeGateway, []testUpstream{{cfg: u}})
	_, err := New(rg.cfg, rg.deps)
	if err == nil || !strings.Contains(err.Error(), `rm.yaml:6:1: /command: command "rm" is not in the upstream's allowed_commands`) {
		t.Fatalf("New = %v", err)
	}
	// prod refuses a cli upstream without a sandbox.
	u.CLI.AllowedCommands = []string{"rm"}
	rg = setup(t, config.ModeGateway, []testUpstream{{cfg: u}}, func(r *rig) { r.cfg.Environment = "prod" })
	if _, err := New(rg.cfg, rg.deps); err == nil || !strings.Contains(err.Error(), "without a sandbox") {
		t.Fatalf("prod without a sandbox: %v", err)
	}
}

// TestOutputPolicyContent: without structured content, JSON text is
// filtered field by field and other content is withheld, unless the policy
// allows everything.
func TestOutputPolicyContent(t *testing.T) {
	text := func(s string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
		return b
	}
	src := catalog.Source{Tools: []catalog.ToolDef{
		{Name: "json_text", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Result: text(`{"user":"ada","token":"s3cr3t-token"}`)},
		{Name: "plain_text", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Result: text("token s3cr3t-token")},
		{Name: "open_text", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), Result: text("token visible")},
	}}
	u := newUpstream("svc")
	u.OutputPolicies = map[string]map[string]string{"*_text": {"user": "allow"}, "open_text": {"**": "allow"}}
	dir := t.TempDir()
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{{cfg: u, src: &src}}, func(r *rig) { r.cfg.StateDir = dir }))
	for name, want := range map[string]string{"json_text": `{\"user\":\"ada\"}`, "plain_text": withheldNote, "open_text": "token visible"} {
		res, env := call(t, cs, ToolExecute, map[string]any{"tool_id": toolID(t, rt, "svc", name), "args": map[string]any{}})
		b, _ := json.Marshal(res)
		if res.IsError || strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), want) {
			t.Errorf("%s: %s (%v)", name, b, env)
		}
	}
	rs := toolReceipts(t, rt, dir, toolID(t, rt, "svc", "json_text"))
	if len(rs) != 1 || rs[0].Tool == nil || strings.Join(rs[0].Tool.RedactedPaths, ",") != "content[0].token" {
		t.Errorf("json_text receipt %+v", rs)
	}
	rs = toolReceipts(t, rt, dir, toolID(t, rt, "svc", "plain_text"))
	if len(rs) != 1 || rs[0].Tool == nil || strings.Join(rs[0].Tool.RedactedPaths, ",") != "content[0]" {
		t.Errorf("plain_text receipt %+v", rs)
	}
}

// TestCLIPermissionsFromClaims: a principal's token claims grant
// permissions ("permissions" array, "scope" string), as the configuration
// does.
func TestCLIPermissionsFromClaims(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "echo", "name: echo_message\ndescription: d\nclass: read\npermissions: [demo:read, demo:echo]\n"+
		"input: {type: object, properties: {message: {type: string}}, additionalProperties: false}\ncommand: echo\nargs: [{arg: message}]\n")
	for _, tc := range []struct {
		claims map[string]any
		ok     bool
	}{
		{map[string]any{"permissions": []any{"demo:read", "demo:echo"}}, true},
		{map[string]any{"scope": "demo:read demo:echo"}, true},
		{map[string]any{"permissions": []any{"demo:read"}, "scope": "demo:echo"}, true},
		{map[string]any{"permissions": []any{"demo:read"}}, false},
		{nil, false},
	} {
		u := newUpstream("tools")
		u.CLI = &config.CLI{Manifests: []string{filepath.Join(dir, "*.yaml")}, AllowedCommands: []string{"echo"}}
		rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{{cfg: u}}, func(r *rig) {
			r.cfg.Auth.Local.Sub, r.cfg.Auth.Local.Claims = "tester", tc.claims
		}))
		args := map[string]any{"tool_id": toolID(t, rt, "tools", "echo_message"), "args": map[string]any{"message": "hi"}}
		if tc.ok {
			if res, env := call(t, cs, ToolExecute, args); res.IsError {
				t.Errorf("claims %v: %v", tc.claims, env)
			}
		} else {
			wantError(t, cs, ToolExecute, args, codes.PermissionMissing)
		}
	}
}

// TestRegistryDestructive: a registry file may classify a tool
// destructive: write for spec 000's guards, and allow_destructive for the
// caller.
func TestRegistryDestructive(t *testing.T) {
	const manifest = `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"crm",
		"tools":[{"tool_name":"get_customer","tool_class":"destructive","is_document_op":false},{"tool_name":"count","tool_class":"read","is_document_op":false}]}`
	for _, perms := range [][]string{nil, {"allow_destructive"}} {
		dir := t.TempDir()
		up := crmUpstream()
		up.cfg.OutputPolicies = nil
		rt, cs := startRuntime(t, setup(t, config.ModeGateway, []testUpstream{up}, func(r *rig) {
			r.cfg.StateDir = dir
			r.cfg.Environment = "prod"
			r.deps.Registry = registryOf(t, manifest)
			r.cfg.Auth.Local.Sub = "tester"
			r.cfg.Principals = map[string]config.Principal{"tester": {Permissions: perms}}
		}))
		id := toolID(t, rt, "crm", "get_customer")
		args := map[string]any{"tool_id": id, "args": map[string]any{}, "idempotency_key": "k1"}
		if perms == nil {
			wantError(t, cs, ToolExecute, args, codes.PermissionMissing)
		} else if res, env := call(t, cs, ToolExecute, args); res.IsError {
			t.Fatalf("with allow_destructive: %v", env)
		}
		wantError(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": map[string]any{}}, map[bool]string{true: codes.PermissionMissing, false: codes.IdempotencyKeyRequired}[perms == nil])
		rs := toolReceipts(t, rt, dir, id)
		if len(rs) != 2 || rs[0].Tool == nil || rs[0].Tool.Class != "destructive" {
			t.Fatalf("receipts %+v", rs)
		}
	}
}
