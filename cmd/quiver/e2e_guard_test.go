package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// guardFleet is a prod configuration over two recording test upstreams
// (alpha and beta, the same server under two names) whose registry is a
// copy of testdata/registry, so that a test may tamper with it.
type guardFleet struct {
	cfg      string // the configuration file
	record   string // the upstreams' call record
	registry string // the directory of the copied manifests
}

func newGuardFleet(t *testing.T, extra string) guardFleet {
	t.Helper()
	dir := t.TempDir()
	f := guardFleet{cfg: filepath.Join(dir, "quiver.yaml"), record: filepath.Join(dir, "calls.jsonl"), registry: filepath.Join(dir, "registry")}
	if err := os.MkdirAll(f.registry, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alpha.json", "beta.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "registry", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.registry, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`environment: prod
state_dir: %s
log: {level: debug}
registry: [registry/*.json, registry/*.yaml]
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-record", %q]
    sandbox: {off: "test fixture"}
  - name: beta
    command: [%q, "-name", "beta", "-record", %q]
    sandbox: {off: "test fixture"}
%s`, filepath.Join(dir, "state"), upstreamBin, f.record, upstreamBin, f.record, extra)
	if err := os.WriteFile(f.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// calls counts the tools/call requests the upstreams saw, by "server/tool".
func (f guardFleet) calls(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(f.record)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct{ Event, Server, Tool string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Event == "call" {
			out[rec.Server+"/"+rec.Tool]++
		}
	}
	return out
}

// toolIDs maps "server/tool" to tool_ids, from path browses.
func toolIDs(t *testing.T, cs *mcp.ClientSession, servers ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, s := range servers {
		cursor := ""
		for {
			args := map[string]any{"path": "/" + s, "top_k": 50}
			if cursor != "" {
				args["cursor"] = cursor
			}
			_, m := callTool(t, cs, "tool_browse", args)
			cards, _ := m["cards"].([]any)
			for _, c := range cards {
				id := c.(map[string]any)["id"].(string)
				name := strings.TrimPrefix(id, s+":")
				name = name[:strings.IndexAny(name, "@#")]
				ids[s+"/"+name] = id
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return ids
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestE2EConformanceRegistry walks every refusal of spec 000 (and quiver's
// idempotency and parity additions) through the real binary over MCP, and
// shows with the upstreams' record that none reached an upstream.
func TestE2EConformanceRegistry(t *testing.T) {
	f := newGuardFleet(t, "")
	cs := stdioSession(t, "--config", f.cfg)
	ids := toolIDs(t, cs, "alpha", "beta")
	echo, add, beta := ids["alpha/echo"], ids["alpha/add"], ids["beta/echo"]
	if echo == "" || add == "" || beta == "" {
		t.Fatalf("ids %v", ids)
	}
	// No manifest classifies whoami: in prod it is not browsed (every
	// call would be refused), and a call of it answers like a missing
	// tool (runtime tests compare the two answers).
	if _, ok := ids["alpha/whoami"]; ok {
		t.Fatalf("prod browses the unclassified whoami: %v", ids)
	}
	// Setup: one admitted write, whose key the reuse case repeats.
	res, env := callTool(t, cs, "tool_execute", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hello"}, "idempotency_key": "used-1",
		"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": hexSHA("hello")}}})
	if res.IsError {
		t.Fatalf("admitted write: %v", env)
	}
	ef := env["effect"].(map[string]any)
	uuidv7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidv7.MatchString(ef["effect_id"].(string)) || ef["content_hash_alg"] != "sha256" || ef["batch_total_bytes"] != 5.0 ||
		ef["document_hashes"].([]any)[0].(map[string]any)["hash"] != hexSHA("hello") {
		t.Fatalf("effect %v", ef)
	}
	before := f.calls(t)

	cases := []struct {
		code string
		args map[string]any
	}{
		{"TOOL_CLASS_DECLARATION_MISMATCH", map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "tool_class": "write"}},
		{"IDEMPOTENCY_KEY_REQUIRED", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}}},
		{"DOC_SIZE_EXCEEDED", map[string]any{"tool_id": echo, "args": map[string]any{"text": strings.Repeat("x", 65)}, "idempotency_key": "k-size"}},
		{"DOC_HASH_MISMATCH", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "k-hash",
			"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": hexSHA("hi\n")}}}},
		{"DOC_CONTENT_POINTER_INVALID", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "k-ptr",
			"expected_document_hashes": []any{map[string]any{"pointer": "/body", "hash": hexSHA("hi")}}}},
		{"DOC_ENCODING_INVALID", map[string]any{"tool_id": beta, "args": map[string]any{"text": "not base64!"}, "idempotency_key": "k-enc"}},
		{"IDEMPOTENCY_KEY_REUSED", map[string]any{"tool_id": echo, "args": map[string]any{"text": "other"}, "idempotency_key": "used-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			res, m := callTool(t, cs, "tool_execute", tc.args)
			if !res.IsError || m["error"] != tc.code {
				t.Fatalf("got %v, want %s", m, tc.code)
			}
			msg, _ := m["message"].(string)
			if msg == "" || strings.ContainsAny(msg, "\n\r") || strings.Contains(msg, "xxxxxxxx") {
				t.Fatalf("message %q", msg)
			}
		})
	}
	// The read-only capability needs a read-only principal: a second
	// process whose stdio principal falls under "*".
	ro := newGuardFleet(t, "principals: {\"*\": {read_only: true}}\n")
	rcs := stdioSession(t, "--config", ro.cfg)
	rids := toolIDs(t, rcs, "alpha")
	t.Run("TOOL_CLASS_MISMATCH", func(t *testing.T) {
		res, m := callTool(t, rcs, "tool_execute", map[string]any{"tool_id": rids["alpha/echo"], "args": map[string]any{"text": "hi"}, "idempotency_key": "k"})
		if !res.IsError || m["error"] != "TOOL_CLASS_MISMATCH" {
			t.Fatalf("got %v", m)
		}
		if res, m := callTool(t, rcs, "tool_execute", map[string]any{"tool_id": rids["alpha/add"], "args": map[string]any{"a": 1, "b": 2}}); res.IsError {
			t.Fatalf("read-only principal, read tool: %v", m)
		}
	})
	if after := f.calls(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused call reached an upstream: before %v, after %v", before, after)
	}
	if calls := ro.calls(t); len(calls) != 1 || calls["alpha/add"] != 1 {
		t.Fatalf("read-only fleet calls %v", calls)
	}
	// The admitted base64 write, and the read-side guard (the call is made,
	// its oversized result withheld).
	if res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": beta, "args": map[string]any{"text": base64.StdEncoding.EncodeToString([]byte{0, 1, 2})}, "idempotency_key": "b-1"}); res.IsError {
		t.Fatalf("base64 write: %v", m)
	}
	if res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": ids["alpha/big_log"], "args": map[string]any{"lines": 100}}); !res.IsError || m["error"] != "DOC_SIZE_EXCEEDED" || m["path"] != "result/content/0/text" {
		t.Fatalf("read-side size: %v", m)
	}
	// Cards and hydrate carry the registry's classification.
	_, h := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": echo})
	if cls := h["classification"].(map[string]any); cls["tool_class"] != "write" || cls["document_op"] != true {
		t.Fatalf("hydrate classification %v", cls)
	}
	_, m := callTool(t, cs, "tool_browse", map[string]any{"path": "/alpha", "top_k": 50})
	for _, c := range m["cards"].([]any) {
		c := c.(map[string]any)
		if c["id"] == echo && (c["side_effects"] != true || !strings.Contains(fmt.Sprint(c["tags"]), "write")) {
			t.Fatalf("echo card %v", c)
		}
	}
}

// TestE2EIdempotencyAcrossRestart: a write repeated with its key dispatches
// once, and still once after quiver restarts on the same state directory.
func TestE2EIdempotencyAcrossRestart(t *testing.T) {
	f := newGuardFleet(t, "")
	args := func(id string) map[string]any {
		return map[string]any{"tool_id": id, "args": map[string]any{"text": "pay 10"}, "idempotency_key": "payment-42"}
	}
	var effect any
	for run := 0; run < 2; run++ {
		cmd := exec.Command(quiverBin, "serve", "--config", f.cfg)
		cmd.Stderr = testWriter{t}
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		echo := toolIDs(t, cs, "alpha")["alpha/echo"]
		for i := 0; i < 2; i++ {
			res, env := callTool(t, cs, "tool_execute", args(echo))
			if res.IsError {
				t.Fatalf("run %d call %d: %v", run, i, env)
			}
			id := env["effect"].(map[string]any)["effect_id"]
			if effect == nil {
				effect = id
			} else if id != effect || env["provenance"].(map[string]any)["idempotent_replay"] != true {
				t.Fatalf("run %d call %d: not a replay of %v: %v", run, i, effect, env)
			}
		}
		res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": echo, "args": map[string]any{"text": "pay 11"}, "idempotency_key": "payment-42"})
		if !res.IsError || m["error"] != "IDEMPOTENCY_KEY_REUSED" {
			t.Fatalf("run %d: reuse %v", run, m)
		}
		cs.Close()
	}
	if calls := f.calls(t); calls["alpha/echo"] != 1 {
		t.Fatalf("echo dispatched %d times", calls["alpha/echo"])
	}
}

// TestE2ERegistryTamper: a manifest changed on disk while quiver runs
// reaches the front door at the next catalog rebuild; the connector keeps
// the version pinned at start, so every call is refused
// (REGISTRY_VERSION_MISMATCH) and nothing reaches the upstream.
func TestE2ERegistryTamper(t *testing.T) {
	f := newGuardFleet(t, "")
	cs := stdioSession(t, "--config", f.cfg)
	ids := toolIDs(t, cs, "alpha")
	if res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": ids["alpha/add"], "args": map[string]any{"a": 1, "b": 2}}); res.IsError {
		t.Fatalf("before: %v", m)
	}
	// The rebuild below shows in the registry version a hydration reports
	// (the new tool is unclassified, which prod does not browse).
	version := func() any {
		_, m := callTool(t, cs, "tool_hydrate", map[string]any{"tool_id": ids["alpha/add"]})
		return field(m, "classification.registry_version")
	}
	pinned := version()
	if pinned == nil {
		t.Fatal("no registry version in the hydration")
	}
	// Tamper: a valid manifest that lifts echo's document limit.
	path := filepath.Join(f.registry, "alpha.json")
	data, _ := os.ReadFile(path)
	tampered := strings.Replace(string(data), `"max_write_bytes": 64`, `"max_write_bytes": 65536`, 1)
	if tampered == string(data) {
		t.Fatal("tamper did not apply")
	}
	if err := os.WriteFile(path, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	// A new upstream tool makes quiver rebuild its catalog (and reload the
	// registry for the front door).
	if res, m := callTool(t, cs, "tool_execute", map[string]any{"tool_id": ids["alpha/add_tool"], "args": map[string]any{"name": "fresh"}, "idempotency_key": "add-fresh"}); res.IsError {
		t.Fatalf("add_tool: %v", m)
	}
	deadline := time.Now().Add(15 * time.Second)
	for version() == pinned {
		if time.Now().After(deadline) {
			t.Fatal("the catalog was not rebuilt")
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := f.calls(t)
	for _, args := range []map[string]any{
		{"tool_id": ids["alpha/add"], "args": map[string]any{"a": 1, "b": 2}},
		{"tool_id": ids["alpha/echo"], "args": map[string]any{"text": strings.Repeat("x", 100)}, "idempotency_key": "big"},
	} {
		res, m := callTool(t, cs, "tool_execute", args)
		if !res.IsError || m["error"] != "REGISTRY_VERSION_MISMATCH" {
			t.Fatalf("after tamper: %v", m)
		}
	}
	if after := f.calls(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("calls reached the upstream: %v -> %v", before, after)
	}
}

// TestE2EServeRejectsBadRegistry: an invalid manifest stops quiver at start
// with one line naming the file.
func TestE2EServeRejectsBadRegistry(t *testing.T) {
	f := newGuardFleet(t, "")
	if err := os.WriteFile(filepath.Join(f.registry, "broken.json"), []byte(`{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"x","tools":[{"tool_name":"t","tool_class":"delete","is_document_op":false}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(quiverBin, "serve", "--config", f.cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "broken.json") || !strings.Contains(string(out), "/tools/0/tool_class") {
		t.Fatalf("exit %v:\n%s", err, out)
	}
}

// TestConfigCheckRegistry: config check validates the registry manifests
// and names the version quiver would pin.
func TestConfigCheckRegistry(t *testing.T) {
	f := newGuardFleet(t, "")
	out, err := exec.Command(quiverBin, "config", "check", "--config", f.cfg).CombinedOutput()
	if err != nil || !regexp.MustCompile(`quiver: registry sha256:[0-9a-f]{64} \(2 manifests, 5 tools\)`).Match(out) {
		t.Fatalf("exit %v:\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(f.registry, "bad.json"), []byte(`{"schema_id":"talos.mcp.tool_registry"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(quiverBin, "config", "check", "--config", f.cfg).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "bad.json") {
		t.Fatalf("exit %v:\n%s", err, out)
	}
}
