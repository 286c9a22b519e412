package runtime

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/units"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// alphaManifest classifies the test upstream's tools (server alpha). Tools
// it does not list (whoami, progress, big_json, ...) are unclassified.
const alphaManifest = `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"alpha","tools":[
 {"tool_name":"echo","tool_class":"write","is_document_op":true,
  "document_spec":{"content_encoding":"utf8","write_content_pointers":["/text"],"read_content_pointers":["/content/0/text"],"max_write_bytes":16,"max_batch_bytes":64}},
 {"tool_name":"add","tool_class":"read","is_document_op":false},
 {"tool_name":"big_log","tool_class":"read","is_document_op":true,
  "document_spec":{"content_encoding":"utf8","read_content_pointers":["/content/0/text"],"max_read_bytes":200}},
 {"tool_name":"fail","tool_class":"write","is_document_op":false},
 {"tool_name":"add_tool","tool_class":"write","is_document_op":false}]}`

// fleetManifests classify the static fleet's servers.
const fleetManifests = `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"math","tools":[
 {"tool_name":"add","tool_class":"read","is_document_op":false},
 {"tool_name":"multiply","tool_class":"read","is_document_op":false}]}
{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"github","tools":[
 {"tool_name":"create_issue","tool_class":"write","is_document_op":true,
  "document_spec":{"content_encoding":"utf8","write_content_pointers":["/title"]}},
 {"tool_name":"list_issues","tool_class":"read","is_document_op":false}]}`

// registryOf parses manifests (one JSON object per line group) into a
// registry loader.
func registryOf(t testing.TB, manifests ...string) func() (*guard.Registry, error) {
	t.Helper()
	p, err := guard.NewManifestParser()
	if err != nil {
		t.Fatal(err)
	}
	var ms []*guard.Manifest
	for _, src := range manifests {
		dec := json.NewDecoder(strings.NewReader(src))
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			m, err := p.Parse("test.json", raw)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
	}
	reg, err := guard.NewRegistry(ms...)
	if err != nil {
		t.Fatal(err)
	}
	return func() (*guard.Registry, error) { return reg, nil }
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// recordedCalls counts, per tool, the calls a recording test upstream saw.
func recordedCalls(t *testing.T, record string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(record)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct{ Event, Tool string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Event == "call" {
			out[rec.Tool]++
		}
	}
	return out
}

// guardedAlpha starts a prod runtime over a recording alpha with the alpha
// manifest.
func guardedAlpha(t *testing.T, mut func(*rig)) (*Runtime, *mcp.ClientSession, string) {
	t.Helper()
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	opts := setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha", "-record", record)}, func(r *rig) { r.cfg.Environment = guard.EnvProd; r.deps.Registry = registryOf(t, alphaManifest) })
	if mut != nil {
		mut(&opts)
	}
	rt, cs := startRuntime(t, opts)
	return rt, cs, record
}

func runExec(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return call(t, cs, ToolExecute, args)
}

// TestExecuteGuards walks every spec 000 refusal through tool_execute, and
// checks with the upstream's record that none reached it.
func TestExecuteGuards(t *testing.T) {
	rt, cs, record := guardedAlpha(t, nil)
	echo, add, whoami, bigLog := idOf(t, rt, "alpha", "echo"), idOf(t, rt, "alpha", "add"), idOf(t, rt, "alpha", "whoami"), idOf(t, rt, "alpha", "big_log")
	cases := []struct {
		name string
		args map[string]any
		code string
		path string
	}{
		// Hidden in prod: a call answers like a missing tool (#15 finding 6).
		{"unclassified in prod", map[string]any{"tool_id": whoami}, CodeHydrateFailed, "tool_id"},
		{"declaration disagrees", map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "tool_class": "write"}, CodeToolClassDeclarationMismatch, "tool_class"},
		{"write without key", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}}, CodeIdempotencyKeyRequired, "idempotency_key"},
		{"document too large", map[string]any{"tool_id": echo, "args": map[string]any{"text": strings.Repeat("x", 17)}, "idempotency_key": "k1"}, CodeDocSizeExceeded, "args/text"},
		{"document not a string (schema first)", map[string]any{"tool_id": echo, "args": map[string]any{}, "idempotency_key": "k2"}, CodeArgsInvalid, "args"},
		{"hash mismatch", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "k3",
			"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": sha256hex("hi\n")}}}, CodeDocHashMismatch, "args/text"},
		{"hash of an unknown pointer", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "k4",
			"expected_document_hashes": []any{map[string]any{"pointer": "/body", "hash": sha256hex("hi")}}}, CodeDocContentPointerInvalid, "args/body"},
		{"hash not hex", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "k5",
			"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": "XYZ"}}}, CodeArgsInvalid, "expected_document_hashes/0/hash"},
		{"bad key", map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "has space"}, CodeArgsInvalid, "idempotency_key"},
		{"bad class", map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "tool_class": "admin"}, CodeArgsInvalid, "tool_class"},
		{"bad alg", map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "content_hash_alg": "md5"}, CodeArgsInvalid, "content_hash_alg"},
		{"invalid args of a write", map[string]any{"tool_id": echo, "args": map[string]any{"text": 3}, "idempotency_key": "k6"}, CodeArgsInvalid, "args"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := wantError(t, cs, ToolExecute, tc.args, tc.code)
			if tc.path != "" && m["path"] != tc.path {
				t.Fatalf("path %v, want %s", m["path"], tc.path)
			}
			if b, _ := json.Marshal(m); strings.Contains(string(b), "xxxxxxxxxxxxxxxxx") {
				t.Fatalf("the error quotes the document: %s", b)
			}
		})
	}
	if calls := recordedCalls(t, record); len(calls) != 0 {
		t.Fatalf("refused calls reached the upstream: %v", calls)
	}
	// What the guards admit does reach it, with the effect accounted.
	res, env := runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": "hi"}, "idempotency_key": "ok-1", "tool_class": "write",
		"expected_document_hashes": []any{map[string]any{"pointer": "/text", "hash": sha256hex("hi")}}, "content_hash_alg": "sha256"})
	if res.IsError {
		t.Fatalf("admitted call: %v", env)
	}
	ef := env["effect"].(map[string]any)
	docs := ef["document_hashes"].([]any)
	// The write of /text and the read of the echoed /content/0/text.
	if len(docs) != 2 || ef["batch_total_bytes"] != 4.0 || ef["tool_class"] != "write" || docs[0].(map[string]any)["hash"] != sha256hex("hi") {
		t.Fatalf("effect %v", ef)
	}
	validateEffect(t, ef)
	// A read-side guard withholds an oversized result (the call was made).
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": bigLog, "args": map[string]any{"lines": 50}}, CodeDocSizeExceeded)
	if m["path"] != "result/content/0/text" {
		t.Fatalf("read-side path %v", m["path"])
	}
	if calls := recordedCalls(t, record); calls["echo"] != 1 || calls["big_log"] != 1 {
		t.Fatalf("calls %v", calls)
	}
}

// validateEffect checks an envelope's effect against tool_effect.schema.json.
func validateEffect(t *testing.T, ef any) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.ToolEffect))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool_effect.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("tool_effect.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(ef); err != nil {
		t.Fatalf("effect %v: %v", ef, err)
	}
}

func TestExecuteEnvironmentsAndCapability(t *testing.T) {
	// dev: unclassified tools run (with a warning in the log).
	rt, cs, _ := guardedAlpha(t, func(o *rig) { o.cfg.Environment = guard.EnvDev })
	res, env := runExec(t, cs, map[string]any{"tool_id": idOf(t, rt, "alpha", "whoami")})
	if res.IsError || env["effect"].(map[string]any)["tool_class"] != "unclassified" {
		t.Fatalf("dev whoami: %v", env)
	}
	// A read-only principal may run read tools only.
	rt, cs, record := guardedAlpha(t, func(o *rig) {
		o.cfg.Auth.Local.Sub = "auditor"
		o.cfg.Principals = map[string]config.Principal{"auditor": {ReadOnly: true}}
	})
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "x"}, "idempotency_key": "k"}, CodeToolClassMismatch)
	if res, env := runExec(t, cs, map[string]any{"tool_id": idOf(t, rt, "alpha", "add"), "args": map[string]any{"a": 1, "b": 2}}); res.IsError {
		t.Fatalf("read-only add: %v", env)
	}
	if calls := recordedCalls(t, record); calls["echo"] != 0 || calls["add"] != 1 {
		t.Fatalf("calls %v", calls)
	}
	// "*" applies to principals not named.
	rt, cs, _ = guardedAlpha(t, func(o *rig) {
		o.cfg.Auth.Local.Sub = "someone"
		o.cfg.Principals = map[string]config.Principal{"*": {ReadOnly: true}, "admin": {}}
	})
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "x"}, "idempotency_key": "k"}, CodeToolClassMismatch)
}

// TestIdempotentWrites: a repeated key with the same arguments is answered
// from its record (also by another runtime on the same state backend, and
// after a restart); other arguments are refused.
func TestIdempotentWrites(t *testing.T) {
	backend := memoryBackend(t)
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	opts := setup(t, config.ModeGateway, []testUpstream{liveUpstream("alpha", "-record", record)}, func(r *rig) {
		r.cfg.Environment = guard.EnvProd
		r.deps.Registry = registryOf(t, alphaManifest)
		r.cfg.StateDir = t.TempDir()
		r.deps.State = backend
	})
	rt, cs := startRuntime(t, opts)
	echo := idOf(t, rt, "alpha", "echo")
	first := map[string]any{"tool_id": echo, "args": map[string]any{"text": "once"}, "idempotency_key": "order-1"}
	_, env1 := runExec(t, cs, first)
	_, env2 := runExec(t, cs, map[string]any{"idempotency_key": "order-1", "args": map[string]any{"text": "once"}, "tool_id": echo})
	id1 := env1["effect"].(map[string]any)["effect_id"]
	if env2["effect"].(map[string]any)["effect_id"] != id1 || env2["provenance"].(map[string]any)["idempotent_replay"] != true {
		t.Fatalf("replay: %v", env2)
	}
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"text": "twice"}, "idempotency_key": "order-1"}, CodeIdempotencyKeyReused)
	// The dry run of a repeat says it would be answered from the record.
	_, dr := runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": "once"}, "idempotency_key": "order-1", "dry_run": true})
	if dr["allowed"] != true || !strings.Contains(mustJSON(dr["checks"]), "answered from its record") {
		t.Fatalf("dry run: %v", dr)
	}
	// A tool error is recorded and replayed too.
	fail := idOf(t, rt, "alpha", "fail")
	for i := 0; i < 2; i++ {
		res, env := runExec(t, cs, map[string]any{"tool_id": fail, "args": map[string]any{"message": "no"}, "idempotency_key": "f-1"})
		if !res.IsError || env["status"] != "error" {
			t.Fatalf("fail %d: %v", i, env)
		}
	}
	if calls := recordedCalls(t, record); calls["echo"] != 1 || calls["fail"] != 1 {
		t.Fatalf("calls %v", calls)
	}
	// Another runtime on the same backend (another process or replica)
	// replays it, and so does one started after the first closed.
	_, csB := startRuntime(t, opts)
	if _, env := runExec(t, csB, first); env["effect"].(map[string]any)["effect_id"] != id1 {
		t.Fatalf("through another runtime: %v", env)
	}
	rt.Close()
	rt2, cs2 := startRuntime(t, opts)
	_ = rt2
	_, env3 := runExec(t, cs2, first)
	if env3["effect"].(map[string]any)["effect_id"] != id1 {
		t.Fatalf("after restart: %v", env3)
	}
	wantError(t, cs2, ToolExecute, map[string]any{"tool_id": echo, "args": map[string]any{"text": "other"}, "idempotency_key": "order-1"}, CodeIdempotencyKeyReused)
	if calls := recordedCalls(t, record); calls["echo"] != 1 {
		t.Fatalf("calls after restart %v", calls)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestConcurrentIdempotentWrites: simultaneous calls with one key dispatch
// once; the others are told it is in progress or get the replay.
func TestConcurrentIdempotentWrites(t *testing.T) {
	rt, cs, record := guardedAlpha(t, nil)
	echo := idOf(t, rt, "alpha", "echo")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolExecute,
				Arguments: map[string]any{"tool_id": echo, "args": map[string]any{"text": "same"}, "idempotency_key": "race"}})
			if err != nil {
				t.Error(err)
				return
			}
			if res.IsError && !strings.Contains(mustJSON(res.StructuredContent), CodeIdempotencyKeyInProgress) {
				t.Errorf("unexpected %s", mustJSON(res.StructuredContent))
			}
		}()
	}
	wg.Wait()
	if calls := recordedCalls(t, record); calls["echo"] != 1 {
		t.Fatalf("calls %v", calls)
	}
}

// TestRegistryTamper: a registry that changes on disk after start reaches
// the front door at the next catalog rebuild, but the connector keeps the
// pinned version: every call is refused until a restart.
func TestRegistryTamper(t *testing.T) {
	pinned := registryOf(t, alphaManifest)
	tampered := registryOf(t, strings.Replace(alphaManifest, `"echo","tool_class":"write"`, `"echo","tool_class":"read"`, 1))
	var loads atomic.Int32
	rt, cs, record := guardedAlpha(t, func(o *rig) {
		o.deps.Registry = func() (*guard.Registry, error) {
			if loads.Add(1) <= 2 { // Start pins, the first rebuild agrees
				return pinned()
			}
			return tampered()
		}
	})
	add := idOf(t, rt, "alpha", "add")
	if res, env := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}); res.IsError {
		t.Fatalf("before: %v", env)
	}
	done := rt.Rebuilt()
	rt.markDirty("alpha")
	<-done
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 1}}, CodeRegistryVersionMismatch)
	if d := m["details"].(map[string]any); d["gateway_version"] == d["connector_version"] {
		t.Fatalf("details %v", d)
	}
	// The tampered class (echo read: no key needed) never gets through.
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": idOf(t, rt, "alpha", "echo"), "args": map[string]any{"text": "x"}}, CodeRegistryVersionMismatch)
	if calls := recordedCalls(t, record); calls["add"] != 1 || calls["echo"] != 0 {
		t.Fatalf("calls %v", calls)
	}
	// A registry that fails to load refuses as well.
	rt2, cs2, _ := guardedAlpha(t, func(o *rig) {
		var n atomic.Int32
		o.deps.Registry = func() (*guard.Registry, error) {
			if n.Add(1) <= 2 {
				return pinned()
			}
			return nil, os.ErrNotExist
		}
	})
	done = rt2.Rebuilt()
	rt2.markDirty("alpha")
	<-done
	wantError(t, cs2, ToolExecute, map[string]any{"tool_id": idOf(t, rt2, "alpha", "add"), "args": map[string]any{"a": 1, "b": 1}}, CodeRegistryVersionMismatch)
}

// TestClassificationInCardsAndHydrate: the registry, not the upstream's
// hints, labels what writes.
func TestClassificationInCardsAndHydrate(t *testing.T) {
	rt, cs := startRuntime(t, setup(t, config.ModeGateway, staticFleet(t), func(r *rig) { r.deps.Registry = registryOf(t, fleetManifests) }))
	issue := idOf(t, rt, "github", "create_issue")
	_, m := call(t, cs, ToolBrowse, map[string]any{"query": "create a github issue", "top_k": 3})
	var card map[string]any
	for _, c := range m["cards"].([]any) {
		if c.(map[string]any)["id"] == issue {
			card = c.(map[string]any)
		}
	}
	if card == nil || card["side_effects"] != true || !strings.Contains(mustJSON(card["tags"]), catalog.TagWrite) {
		t.Fatalf("card %v", card)
	}
	_, h := call(t, cs, ToolHydrate, map[string]any{"tool_id": issue})
	cls := h["classification"].(map[string]any)
	if cls["tool_class"] != "write" || cls["document_op"] != true || !strings.HasPrefix(cls["registry_version"].(string), "sha256:") {
		t.Fatalf("classification %v", cls)
	}
	_, h = call(t, cs, ToolHydrate, map[string]any{"tool_id": idOf(t, rt, "weather", "get_forecast")})
	if h["classification"].(map[string]any)["tool_class"] != "unclassified" {
		t.Fatalf("weather %v", h["classification"])
	}
	// The tool_execute inputSchema is the tool_call schema.
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == ToolExecute {
			s := mustJSON(tool.InputSchema)
			for _, k := range []string{"idempotency_key", "expected_document_hashes", "tool_class", "dry_run", "content_hash_alg", `"additionalProperties":false`} {
				if !strings.Contains(s, k) {
					t.Fatalf("tool_execute schema lacks %s: %s", k, s)
				}
			}
		}
	}
}

// TestDryRunReport: every check, nothing dispatched, no quota consumed.
func TestDryRunReport(t *testing.T) {
	rt, cs, record := guardedAlpha(t, func(o *rig) {
		o.cfg.RateLimits = map[string]config.RateLimit{"tool_execute": {MaxCallsPerSession: 1}}
	})
	echo := idOf(t, rt, "alpha", "echo")
	_, dr := runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": strings.Repeat("y", 20)}, "dry_run": true, "tool_class": "read"})
	if dr["dry_run"] != true || dr["allowed"] != false || dr["tool_class"] != "write" {
		t.Fatalf("report %v", dr)
	}
	status := map[string]string{}
	var names []string
	for _, c := range dr["checks"].([]any) {
		c := c.(map[string]any)
		names = append(names, c["name"].(string))
		status[c["name"].(string)] = c["status"].(string) + " " + mustStr(c["detail"])
	}
	if strings.Join(names, ",") != "hydrate,authorization,registry_classification,tool_class_declaration,read_only_capability,idempotency_key,schema_validation,strict_args,registry_parity,document_guards,rate_limit,idempotency_record" {
		t.Fatalf("checks %v", names)
	}
	for name, want := range map[string]string{
		"tool_class_declaration": "fail " + CodeToolClassDeclarationMismatch,
		"idempotency_key":        "fail " + CodeIdempotencyKeyRequired,
		"schema_validation":      "pass",
		"rate_limit":             "pass",
	} {
		if !strings.HasPrefix(status[name], want) {
			t.Errorf("%s: %q, want %q", name, status[name], want)
		}
	}
	// Connector checks are reported even after a front-door failure.
	if !strings.HasPrefix(status["registry_parity"], "fail "+CodeIdempotencyKeyRequired) {
		t.Errorf("registry_parity: %q", status["registry_parity"])
	}
	// A clean dry run is allowed, dispatches nothing and spends no quota.
	for i := 0; i < 3; i++ {
		_, dr = runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": "ok"}, "idempotency_key": "d", "dry_run": true})
		if dr["allowed"] != true {
			t.Fatalf("dry run %v", dr)
		}
	}
	if res, env := runExec(t, cs, map[string]any{"tool_id": echo, "args": map[string]any{"text": "ok"}, "idempotency_key": "d"}); res.IsError {
		t.Fatalf("quota spent by dry runs: %v", env)
	}
	if calls := recordedCalls(t, record); calls["echo"] != 1 {
		t.Fatalf("calls %v", calls)
	}
}

func mustStr(v any) string {
	s, _ := v.(string)
	return s
}

// countingConn wraps a conn, counting dispatches and failing the first
// failFirst of them with a transient error.
type countingConn struct {
	conn
	calls     atomic.Int64
	failFirst int64
	failWith  error
}

func (c *countingConn) callTool(ctx context.Context, it *catalog.Item, args map[string]any) (*mcp.CallToolResult, error) {
	if n := c.calls.Add(1); n <= c.failFirst {
		return nil, c.failWith
	}
	return c.conn.callTool(ctx, it, args)
}

// startCounted starts a runtime over the static fleet whose dispatches
// are counted.
func startCounted(t *testing.T, tweak func(*rig), failFirst int64) (*Runtime, *mcp.ClientSession, *countingConn) {
	t.Helper()
	rg := setup(t, config.ModeGateway, staticFleet(t), tweak)
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{conn: rt.upstreams()[0].conn, failFirst: failFirst,
		failWith: &upstream.Error{Code: CodeUpstreamUnavailable, Retryable: true, Err: upstream.ErrSessionEnded}}
	rt.upstreams()[0].conn = cc
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		rt.Close()
	})
	if err := startAndWait(ctx, rt); err != nil {
		t.Fatal(err)
	}
	return rt, connect(t, ctx, rt), cc
}

func TestRetry(t *testing.T) {
	retry := config.Retry{MaxAttempts: 3, BaseDelay: units.Duration(time.Millisecond), MaxDelay: units.Duration(5 * time.Millisecond), Jitter: true,
		RetryableCodes: []string{CodeUpstreamUnavailable}}
	for _, tc := range []struct {
		name     string
		retry    config.Retry
		registry bool
		tool     string
		args     map[string]any
		key      string
		failures int64
		code     string
		attempts float64
		calls    int64
	}{
		{"off", config.Retry{}, false, "add", map[string]any{"a": 1, "b": 2}, "", 1, CodeUpstreamUnavailable, 0, 1},
		{"recovers", retry, false, "add", map[string]any{"a": 1, "b": 2}, "", 2, "", 3, 3},
		{"gives up", retry, false, "add", map[string]any{"a": 1, "b": 2}, "", 5, CodeUpstreamUnavailable, 0, 3},
		{"writes are not retried", retry, true, "create_issue", map[string]any{"repo": "a/b", "title": "t"}, "w1", 1, CodeUpstreamUnavailable, 0, 1},
		{"only configured codes", config.Retry{MaxAttempts: 3, RetryableCodes: []string{CodeUpstreamTimeout}}, false, "add", map[string]any{"a": 1, "b": 2}, "", 1, CodeUpstreamUnavailable, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, cs, cc := startCounted(t, func(r *rig) {
				r.cfg.Retry = tc.retry
				if tc.registry {
					r.deps.Registry = registryOf(t, fleetManifests)
				}
			}, tc.failures)
			args := map[string]any{"tool_id": idOf(t, rt, map[string]string{"add": "math", "create_issue": "github"}[tc.tool], tc.tool), "args": tc.args}
			if tc.key != "" {
				args["idempotency_key"] = tc.key
			}
			res, m := runExec(t, cs, args)
			switch {
			case tc.code != "" && (!res.IsError || m["error"] != tc.code):
				t.Fatalf("got %v, want %s", m, tc.code)
			case tc.code == "" && (res.IsError || m["provenance"].(map[string]any)["attempts"] != tc.attempts):
				t.Fatalf("got %v", m)
			}
			if cc.calls.Load() != tc.calls {
				t.Fatalf("%d dispatches, want %d", cc.calls.Load(), tc.calls)
			}
		})
	}
}

func TestResultCache(t *testing.T) {
	add := map[string]any{"a": 1, "b": 2}
	addReordered := map[string]any{"b": 2, "a": 1}
	cases := []struct {
		name     string
		cache    config.Cache
		registry bool
		tool     string
		server   string
		args     []map[string]any
		key      bool
		calls    int64
	}{
		{"off", config.Cache{}, false, "add", "math", []map[string]any{add, add}, false, 2},
		{"read-only hint", config.Cache{ReadOnly: true}, false, "add", "math", []map[string]any{add, addReordered}, false, 1},
		{"different args", config.Cache{ReadOnly: true}, false, "add", "math", []map[string]any{add, {"a": 2, "b": 2}}, false, 2},
		{"no read-only hint", config.Cache{ReadOnly: true}, false, "multiply", "math", []map[string]any{add, add}, false, 2},
		{"not allowed", config.Cache{ReadOnly: true, Allow: []string{"github:*"}}, false, "add", "math", []map[string]any{add, add}, false, 2},
		{"registry read, no hint needed", config.Cache{ReadOnly: true}, true, "multiply", "math", []map[string]any{add, add}, false, 1},
		{"registry write never cached", config.Cache{ReadOnly: true}, true, "create_issue", "github", []map[string]any{{"repo": "r", "title": "a"}, {"repo": "r", "title": "a"}}, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt, cs, cc := startCounted(t, func(r *rig) {
				r.cfg.Cache = tc.cache
				if tc.registry {
					r.deps.Registry = registryOf(t, fleetManifests)
				}
			}, 0)
			id := idOf(t, rt, tc.server, tc.tool)
			for i, a := range tc.args {
				args := map[string]any{"tool_id": id, "args": a}
				if tc.key {
					args["idempotency_key"] = "k" + string(rune('0'+i))
				}
				res, env := runExec(t, cs, args)
				if res.IsError {
					t.Fatalf("call %d: %v", i, env)
				}
				hit, _ := env["provenance"].(map[string]any)["cache_hit"].(bool)
				if want := i == 1 && tc.calls == 1; hit != want {
					t.Fatalf("call %d: cache_hit %v", i, hit)
				}
			}
			if cc.calls.Load() != tc.calls {
				t.Fatalf("%d dispatches, want %d", cc.calls.Load(), tc.calls)
			}
		})
	}
	// Errors are never cached, and a catalog refresh invalidates.
	rt, cs, cc := startCounted(t, func(r *rig) { r.cfg.Cache = config.Cache{ReadOnly: true} }, 1)
	id := idOf(t, rt, "math", "add")
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": id, "args": add}, CodeUpstreamUnavailable)
	runExec(t, cs, map[string]any{"tool_id": id, "args": add})
	runExec(t, cs, map[string]any{"tool_id": id, "args": add})
	if cc.calls.Load() != 2 {
		t.Fatalf("%d dispatches after an error", cc.calls.Load())
	}
	done := rt.Rebuilt()
	rt.markDirty("fleet")
	<-done
	_, env := runExec(t, cs, map[string]any{"tool_id": id, "args": add})
	if cc.calls.Load() != 3 || env["provenance"].(map[string]any)["cache_hit"] != nil {
		t.Fatalf("after refresh: %d dispatches, %v", cc.calls.Load(), env["provenance"])
	}
}

func TestRateLimits(t *testing.T) {
	rt, cs, cc := startCounted(t, func(r *rig) {
		r.cfg.RateLimits = map[string]config.RateLimit{
			"tool_execute":     {MaxCallsPerMinute: 3},
			"tool:math:mul*":   {MaxCallsPerSession: 1},
			"tool_browse":      {MaxCallsPerSession: 2},
			"tool_hydrate":     {MaxCallsPerMinute: 1},
			"tool:nothing:*":   {MaxCallsPerSession: 1},
			"tool:github:list": {MaxCallsPerMinute: 100},
		}
	}, 0)
	add, mul := idOf(t, rt, "math", "add"), idOf(t, rt, "math", "multiply")
	ok := func(args map[string]any) {
		t.Helper()
		if res, env := runExec(t, cs, args); res.IsError {
			t.Fatalf("refused: %v", env)
		}
	}
	ok(map[string]any{"tool_id": mul, "args": map[string]any{"a": 1, "b": 2}})
	m := wantError(t, cs, ToolExecute, map[string]any{"tool_id": mul, "args": map[string]any{"a": 1, "b": 2}}, CodeRateLimited)
	if d := m["details"].(map[string]any); d["scope"] != "tool:math:mul*" || d["limit"] != "max_calls_per_session" || m["retryable"] != false {
		t.Fatalf("session cap: %v", m)
	}
	ok(map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}})
	ok(map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "dry_run": true}) // free
	ok(map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}})
	m = wantError(t, cs, ToolExecute, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}}, CodeRateLimited)
	d := m["details"].(map[string]any)
	if d["scope"] != "tool_execute" || m["retryable"] != true || d["retry_after"].(float64) <= 0 || d["retry_after"].(float64) > 60 {
		t.Fatalf("window: %v", m)
	}
	// The refused tool:math:mul call counted against tool_execute nothing.
	if cc.calls.Load() != 3 {
		t.Fatalf("%d dispatches", cc.calls.Load())
	}
	_, dr := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": 1, "b": 2}, "dry_run": true})
	if dr["allowed"] != false || !strings.Contains(mustJSON(dr["checks"]), CodeRateLimited) {
		t.Fatalf("dry run over quota: %v", dr)
	}
	call(t, cs, ToolBrowse, map[string]any{"query": "add"})
	call(t, cs, ToolBrowse, map[string]any{"query": "add"})
	wantError(t, cs, ToolBrowse, map[string]any{"query": "add"}, CodeRateLimited)
	call(t, cs, ToolHydrate, map[string]any{"tool_id": add})
	wantError(t, cs, ToolHydrate, map[string]any{"tool_id": add}, CodeRateLimited)
	// Another session has its own counts.
	other := connect(t, context.Background(), rt)
	call(t, other, ToolBrowse, map[string]any{"query": "add"})
}

func TestTolerantArgs(t *testing.T) {
	for _, on := range []bool{false, true} {
		rt, cs, _ := startCounted(t, func(r *rig) { r.cfg.TolerantArgs = on }, 0)
		add := idOf(t, rt, "math", "add")
		raw := json.RawMessage(`{"tool_id":"` + add + `","args":"{\"a\":\"2\",\"b\":\"3.5\"}"}`)
		res, m := call(t, cs, ToolExecute, raw)
		if !on {
			if !res.IsError || m["error"] != CodeArgsInvalid {
				t.Fatalf("off: %v", m)
			}
			if res, m := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": "2", "b": 3}}); !res.IsError || m["error"] != CodeArgsInvalid {
				t.Fatalf("off, string number: %v", m)
			}
			continue
		}
		if res.IsError {
			t.Fatalf("on: %v", m)
		}
		repairs := mustJSON(m["provenance"].(map[string]any)["arg_repairs"])
		if repairs != `["parse_stringified_object /","str_to_number /a","str_to_number /b"]` {
			t.Fatalf("repairs %s", repairs)
		}
		sc := m["result"].(map[string]any)["structuredContent"].(map[string]any)
		if sc["a"] != 2.0 || sc["b"] != 3.5 {
			t.Fatalf("dispatched %v", sc)
		}
		// Unrepairable input still fails.
		if res, m := runExec(t, cs, map[string]any{"tool_id": add, "args": map[string]any{"a": "two", "b": 3}}); !res.IsError || m["error"] != CodeArgsInvalid {
			t.Fatalf("on, unrepairable: %v", m)
		}
	}
}

// TestBase64Documents: a base64 document op through the runtime.
func TestBase64Documents(t *testing.T) {
	manifest := `{"schema_id":"talos.mcp.tool_registry","schema_version":"v1","server_id":"github","tools":[
	 {"tool_name":"create_issue","tool_class":"write","is_document_op":true,
	  "document_spec":{"content_encoding":"base64","write_content_pointers":["/title"],"max_write_bytes":4}}]}`
	rt, cs, cc := startCounted(t, func(r *rig) { r.cfg.Environment, r.deps.Registry = guard.EnvProd, registryOf(t, manifest) }, 0)
	issue := idOf(t, rt, "github", "create_issue")
	b64 := base64.StdEncoding.EncodeToString([]byte("\x00\x01\x02"))
	res, env := runExec(t, cs, map[string]any{"tool_id": issue, "args": map[string]any{"repo": "r", "title": b64}, "idempotency_key": "b1",
		"expected_document_hashes": []any{map[string]any{"pointer": "/title", "hash": sha256hex("\x00\x01\x02")}}})
	if res.IsError || env["effect"].(map[string]any)["batch_total_bytes"] != 3.0 {
		t.Fatalf("%v", env)
	}
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": issue, "args": map[string]any{"repo": "r", "title": "not base64"}, "idempotency_key": "b2"}, CodeDocEncodingInvalid)
	wantError(t, cs, ToolExecute, map[string]any{"tool_id": issue, "args": map[string]any{"repo": "r", "title": base64.StdEncoding.EncodeToString([]byte("12345"))}, "idempotency_key": "b3"}, CodeDocSizeExceeded)
	if cc.calls.Load() != 1 {
		t.Fatalf("%d dispatches", cc.calls.Load())
	}
}
