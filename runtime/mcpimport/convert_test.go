package mcpimport_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/mcpimport"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// existing are the paths the fixtures' machine has.
var existing = map[string]bool{
	"/home/user/Desktop": true, "/home/user/Downloads": true, "/home/user/.local/share/memory.json": true,
	"/home/user/bin/mcp-server-sqlite": true, "/home/user/data/test.db": true,
	"/work/project": true, "/work/project/tools/notes-server.js": true, "/work/project/notes": true,
}

// options place a fixture on that machine: home /home/user, project
// /work/project.
func options(skeleton bool, env string) mcpimport.Options {
	return mcpimport.Options{Skeleton: skeleton, Environment: env, Home: "/home/user", Workspace: "/work/project",
		OutDir: "/work/project", Exists: func(p string) bool { return existing[p] },
		IsDir: func(p string) bool { return existing[p] && filepath.Ext(p) == "" }}
}

// TestConvertGolden converts one fixture per client, written as each
// client documents its file, and compares the YAML and warnings of `quiver
// config import` with the golden files; the YAML must load as a quiver
// configuration, as the prod skeleton and as served in dev and prod.
func TestConvertGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		dialect mcpimport.Dialect
		client  string
		servers int
	}{
		{"claude-desktop/claude_desktop_config.json", mcpimport.DialectMCPServers, "Claude Desktop", 5},
		{"cursor/.cursor/mcp.json", mcpimport.DialectMCPServers, "Cursor", 3},
		{"claude-code/.mcp.json", mcpimport.DialectMCPServers, "Claude Code", 3},
		{"windsurf/mcp_config.json", mcpimport.DialectMCPServers, "Windsurf", 3},
		{"vscode/.vscode/mcp.json", mcpimport.DialectVSCode, "VS Code", 3},
	} {
		t.Run(filepath.Dir(tc.file), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := mcpimport.Detect(data); d != tc.dialect {
				t.Fatalf("Detect = %q, want %q", d, tc.dialect)
			}
			res, err := mcpimport.Convert(tc.file, data, options(true, "prod"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Client != tc.client || res.Servers != tc.servers {
				t.Errorf("client %q servers %d, want %q %d", res.Client, res.Servers, tc.client, tc.servers)
			}
			golden(t, filepath.Join("testdata", tc.file+".yaml.golden"), res.YAML)
			golden(t, filepath.Join("testdata", tc.file+".warnings.golden"), []byte(strings.Join(res.Warnings, "\n")+"\n"))
			for _, secret := range []string{"ghp_", `"value"`, "changeme"} {
				if strings.Contains(string(res.YAML), secret) || strings.Contains(strings.Join(res.Warnings, "\n"), secret) {
					t.Errorf("the literal secret %s reached the YAML or a warning", secret)
				}
			}
			cfg, err := config.Parse(tc.file+".yaml", res.YAML, "/work/project")
			if err != nil {
				t.Fatalf("the skeleton does not load: %v", err)
			}
			if cfg.Environment != "prod" || len(cfg.Upstreams) != tc.servers {
				t.Errorf("skeleton: environment %s, %d upstreams", cfg.Environment, len(cfg.Upstreams))
			}
			for _, u := range cfg.Upstreams {
				if len(u.Command) > 0 && u.Sandbox == nil {
					t.Errorf("skeleton: %s has no sandbox block", u.Name)
				}
			}
			for _, env := range []string{"dev", "prod"} {
				res, err := mcpimport.Convert(tc.file, data, options(false, env))
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := config.Parse(tc.file, res.YAML, "/work/project")
				if err != nil {
					t.Fatalf("served in %s: %v", env, err)
				}
				if string(cfg.Environment) != env || len(cfg.Registry) != 0 {
					t.Errorf("served in %s: environment %s, registry %v", env, cfg.Environment, cfg.Registry)
				}
				for _, u := range cfg.Upstreams {
					if (u.Sandbox != nil) != (env == "prod" && len(u.Command) > 0) {
						t.Errorf("served in %s: %s sandbox %v", env, u.Name, u.Sandbox)
					}
				}
			}
		})
	}
}

// TestConvertRefusals: a malformed, foreign or inexpressible file gets one
// line naming the file and the key.
func TestConvertRefusals(t *testing.T) {
	for file, want := range map[string]string{
		"truncated.json":       "errors/truncated.json: not valid JSON",
		"zed.json":             "errors/zed.json: context_servers: Zed's context_servers is not a format quiver imports",
		"unknown.json":         "errors/unknown.json: no mcpServers or servers key",
		"badtype.json":         "errors/badtype.json: mcpServers.x.type: must be stdio, http, streamable-http or sse",
		"badarg.json":          "errors/badarg.json: mcpServers.x.args[1]: must be a string",
		"envfile.json":         "errors/envfile.json: servers.x.envFile: is not supported",
		"argsecret.json":       "errors/argsecret.json: mcpServers.x.args[1]: takes ${API_TOKEN} from the environment",
		"undeclaredinput.json": "errors/undeclaredinput.json: servers.x.env.K: uses ${input:nope}, which no entry of inputs declares",
		"urlvar.json":          "errors/urlvar.json: mcpServers.events.url: takes ${EVENTS_URL} from the environment",
		"typo.json":            "errors/typo.json: mcpServers.x.comand: unknown key",
		"notobject.json":       "errors/notobject.json: mcpServers: must be an object",
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata/errors", file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = mcpimport.Convert("errors/"+file, data, options(true, "prod"))
			if !errors.Is(err, mcpimport.ErrImport) {
				t.Fatalf("err = %v, want ErrImport", err)
			}
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q, want prefix %q", err, want)
			}
		})
	}
	big := make([]byte, mcpimport.MaxFileSize+1)
	if _, err := mcpimport.Convert("big.json", big, mcpimport.Options{}); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("oversized: %v", err)
	}
}

// TestDetect: quiver's own files, YAML and other JSON are not client
// files.
func TestDetect(t *testing.T) {
	for in, want := range map[string]mcpimport.Dialect{
		`{"mcpServers": {}}`:               mcpimport.DialectMCPServers,
		`{"servers": {}, "inputs": []}`:    mcpimport.DialectVSCode,
		`{"mcp": {"servers": {}}}`:         mcpimport.DialectVSCode,
		"// c\n{\"servers\": {},}":         mcpimport.DialectVSCode,
		`{"upstreams": [], "servers": {}}`: "",
		"mode: gateway\nupstreams: []\n":   "",
		`{"mode": "gateway"}`:              "",
		`[]`:                               "",
		`{"mcpServers": {}} trailing`:      "",
	} {
		if got := mcpimport.Detect([]byte(in)); got != want {
			t.Errorf("Detect(%q) = %q, want %q", in, got, want)
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run go test -update and review the diff):\n%s", path, got)
	}
}
