package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/quiver-mcp/quiver/runtime/eval"
)

// TestE2ECLIToolsOverHTTP: a cli upstream behind `quiver serve --http`
// with JWT callers: permissions from the token's claims, option injection
// refused, an output policy from the configuration masking and removing
// fields before anything is stored, and receipts with the tool section;
// sandboxed by bubblewrap when it works here.
func TestE2ECLIToolsOverHTTP(t *testing.T) {
	tools := t.TempDir()
	must(t, os.WriteFile(filepath.Join(tools, "echo.yaml"), []byte(`name: echo_message
description: Echo a message.
class: read
permissions: [demo:read]
input: {type: object, properties: {message: {type: string, maxLength: 100}}, required: [message], additionalProperties: false}
command: echo
args: [{arg: message}]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(tools, "user.yaml"), []byte(`name: get_user
description: A user record as JSON.
class: read
permissions: [demo:read]
input: {type: object, additionalProperties: false}
command: printf
args: ['{"user":{"name":"Ada Lovelace","email":"ada@example.com","token":"tok-9f8e7d"}}']
output: {parser: json}
`), 0o644))
	sb := "    sandbox: {off: \"e2e: bubblewrap unusable here\"}\n"
	if eval.BwrapUsable(context.Background()) {
		sb = fmt.Sprintf("    sandbox: {fs: {read: [%q]}, net: none}\n", tools)
	}
	e := startSafety(t, fmt.Sprintf(`  - name: demo
    cli: {manifests: [%q], allowed_commands: [echo, printf]}
    output_policies:
      get_*: {user.name: allow, user.email: mask}
%s`, filepath.Join(tools, "*.yaml"), sb))

	// The policy lets SREs call anything; the manifest still asks for
	// demo:read, which only the first token carries.
	granted := e.as(t, hsToken(t, "dave", jwt.MapClaims{"groups": []any{"sre"}, "permissions": []any{"demo:read"}}))
	names := listNames(t, granted)
	echo, user := listedID(t, granted, names, "demo", "echo_message"), listedID(t, granted, names, "demo", "get_user")
	if echo == "" || user == "" {
		t.Fatalf("cli tools not listed: %v", names)
	}
	res, m := execute(t, granted, echo, map[string]any{"message": "$(id); *"})
	if res.IsError || !strings.Contains(mustJSONText(t, m), "$(id); *") {
		t.Fatalf("echo: %v", m)
	}
	_, m = execute(t, granted, echo, map[string]any{"message": "--help"})
	if errCode(m) != "CLI_ARG_REFUSED" {
		t.Fatalf("option injection: %v", m)
	}
	res, m = execute(t, granted, user, map[string]any{})
	text := mustJSONText(t, m)
	if res.IsError || !strings.Contains(text, "Ada Lovelace") || !strings.Contains(text, "a***m") ||
		strings.Contains(text, "ada@example.com") || strings.Contains(text, "tok-9f8e7d") {
		t.Fatalf("get_user under the output policy: %s", text)
	}
	r := e.waitReceipt(t, "get_user", func(r map[string]any) bool { return executed(r, user) })
	if field(r, "tool.tool_class") != "read" || !hasString(field(r, "tool.redacted_paths"), "user.email") ||
		!hasString(field(r, "tool.redacted_paths"), "user.token") || len(fmt.Sprint(field(r, "tool.output_sha256"))) != 64 {
		t.Fatalf("receipt %v", r)
	}
	if want := map[bool]string{true: "bwrap", false: "off"}[!strings.Contains(sb, "off:")]; field(r, "sandbox.mode") != want {
		t.Errorf("sandbox mode %v, want %s", field(r, "sandbox.mode"), want)
	}

	// Without the permission claim: refused at the permission stage.
	other := e.as(t, hsToken(t, "erin", jwt.MapClaims{"groups": []any{"sre"}}))
	_, m = execute(t, other, echo, map[string]any{"message": "hi"})
	if errCode(m) != "PERMISSION_MISSING" {
		t.Fatalf("no permission: %v", m)
	}
	r = e.waitReceipt(t, "refused echo", func(r map[string]any) bool {
		return executed(r, echo) && field(r, "principal.sub") == "erin"
	})
	if field(r, "decision.result") != "deny" || field(r, "tool.denial_stage") != "permission" {
		t.Fatalf("receipt %v", r)
	}
}

func mustJSONText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}
