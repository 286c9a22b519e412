package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
)

func TestConfigCheckExample(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	t.Setenv("XDG_STATE_HOME", "")
	const file = "../../examples/quiver.yaml"
	code, out, errs := runCLI(t, "config", "check", "--config", file)
	if _, err := exec.LookPath("npx"); err != nil {
		// The example's servers start with npx: without it the check
		// fails, naming the first.
		if code != 2 || !strings.Contains(errs, `upstreams[0].command[0]: "npx" is not on PATH`) {
			t.Fatalf("without npx: exit %d: %s", code, errs)
		}
		t.Skip("npx not installed: the example's effective settings are not printed")
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"mode: gateway\n",
		"  transport: stdio\n",
		"state_dir: /home/op/.local/state/quiver\n",
		"  - name: everything\n    command: [npx, -y, '@modelcontextprotocol/server-everything']\n",
		"  - name: filesystem\n",
		"  - name: memory\n",
		"      bearer_env: DOCS_TOKEN\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// What check prints is itself a valid configuration, equal to the file's.
	want, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(file, []byte(out), want.Dir)
	if err != nil {
		t.Fatalf("effective settings do not load: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("effective settings differ from the file:\n%+v\n%+v", got, want)
	}

	code, out, errs = runCLI(t, "config", "check", "--config", file, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if doc["mode"] != "gateway" || len(doc["upstreams"].([]any)) != 4 {
		t.Fatalf("--json: %v", doc)
	}
}

func TestConfigCheckInvalid(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "quiver.yaml")
	src := "upstreams:\n  - name: a\n    command: [x]\n  - name: b\n    url: http://h/mcp\n    trust_level: high\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "config", "check", "--config", file)
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	want := "quiver: " + file + ":6:5: upstreams[1].trust_level: must be one of internal, verified, community, unknown\n"
	if errs != want {
		t.Fatalf("stderr\n got %q\nwant %q", errs, want)
	}

	code, _, errs = runCLI(t, "config", "check", "--config", filepath.Join(dir, "missing.yaml"))
	if code != 2 || !strings.HasSuffix(errs, "missing.yaml: cannot open: no such file or directory\n") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("missing file: exit %d, %q", code, errs)
	}
	code, _, _ = runCLI(t, "config", "check", "--bogus")
	if code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

func TestConfigCheckSearch(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("XDG_STATE_HOME", "")

	// Nothing to find: the built-in defaults.
	code, out, errs := runCLI(t, "config", "check")
	if code != 0 || !strings.Contains(errs, "no configuration file found") || !strings.Contains(out, "upstreams: []\n") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}

	// $XDG_CONFIG_HOME/quiver/config.yaml, then ./quiver.yaml before it.
	xdg := filepath.Join(dir, "xdg", "quiver")
	if err := os.MkdirAll(xdg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "config.yaml"), []byte("mode: proxy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "config", "check")
	if code != 0 || !strings.HasPrefix(out, "mode: proxy\n") {
		t.Fatalf("xdg: exit %d, %s\n%s", code, errs, out)
	}
	if err := os.WriteFile("quiver.yaml", []byte("mode: direct\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "config", "check")
	if code != 0 || !strings.HasPrefix(out, "mode: direct\n") {
		t.Fatalf("cwd: exit %d, %s\n%s", code, errs, out)
	}
}

// TestConfigCheckCLIManifests: config check validates the tool manifests
// of cli upstreams, naming file, line and field of a bad one.
func TestConfigCheckCLIManifests(t *testing.T) {
	code, _, stderr := runCLI(t, "config", "check", "--config", "../../examples/cli/quiver.yaml")
	if code != 0 || !strings.Contains(stderr, "cli upstream repo: 6 tools") {
		t.Fatalf("examples/cli: %d %s", code, stderr)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "q.yaml"), []byte("upstreams: [{name: r, cli: {manifests: [t.yaml], allowed_commands: [ls]}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.yaml"), []byte("name: t\ndescription: d\nclass: read\npermissions: [p]\ninput: {type: object, additionalProperties: false}\ncommand: ls\nshell: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "config", "check", "--config", filepath.Join(dir, "q.yaml"))
	if code != 2 || !strings.Contains(stderr, "t.yaml:7:1: /shell: additional properties 'shell' not allowed") {
		t.Fatalf("bad manifest: %d %s", code, stderr)
	}
}

// TestConfigImportExample: the example client file imports to a prod
// skeleton that loads, its "." argument made the examples directory and
// the sandbox's writable root; serve-as-is loads it in dev.
func TestConfigImportExample(t *testing.T) {
	const file = "../../examples/mcp.json"
	code, out, errs := runCLI(t, "config", "import", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("imported.yaml", []byte(out), t.TempDir())
	if err != nil {
		t.Fatalf("the import does not load: %v\n%s", err, out)
	}
	if cfg.Environment != "prod" || len(cfg.Upstreams) != 4 || len(cfg.Registry) != 1 {
		t.Fatalf("environment %s, %d upstreams, registry %v", cfg.Environment, len(cfg.Upstreams), cfg.Registry)
	}
	fs := cfg.Upstreams[1]
	if fs.Name != "filesystem" || fs.Command[3] != examples || fs.Dir != examples || fs.Sandbox == nil ||
		!reflect.DeepEqual(fs.Sandbox.FS.Write, []string{examples}) || !reflect.DeepEqual(fs.Sandbox.Net.Allow, []string{"registry.npmjs.org"}) {
		t.Errorf("filesystem: %+v sandbox %+v", fs, fs.Sandbox)
	}
	if docs := cfg.Upstreams[3]; docs.Enabled || docs.Credentials.BearerEnv != "DOCS_TOKEN" {
		t.Errorf("docs: %+v", docs)
	}
	served, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if served.Environment != "dev" || served.Imported == nil || served.Imported.Disabled != 1 {
		t.Errorf("served: %s %+v", served.Environment, served.Imported)
	}
}
