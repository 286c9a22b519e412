package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (run with -update to accept):\n%s", path, got)
	}
}

func TestCatalogIDs(t *testing.T) {
	code, out, errs := runCLI(t, "catalog", "ids", "--catalog", "testdata/vectors.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		`{"server":"","name":"github.create_issue","kind":"tool","tool_id":"github:create_issue#34afee88"}`,
		`{"server":"","name":"github.list_repos","kind":"tool","tool_id":"github:list_repos#da62b2ed"}`,
		`{"server":"","name":"slack_send_message","kind":"tool","tool_id":"slack:slack_send_message#283a5dcf"}`,
		`{"server":"","name":"github.create_issue","kind":"tool","tool_id":"github:create_issue@1.4.0"}`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing line %s", want)
		}
	}
	golden(t, "vectors.ids.golden", out)
}

func TestCatalogCards(t *testing.T) {
	code, out, errs := runCLI(t, "catalog", "cards", "--catalog", "testdata/vectors.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d card lines", len(lines))
	}
	for _, l := range lines {
		var c map[string]any
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		if n, ok := c["tokens"].(float64); !ok || n <= 0 || n > 80 {
			t.Fatalf("tokens = %v in %s", c["tokens"], l)
		}
		for _, banned := range []string{"inputSchema", "args_schema", "annotations", "_meta"} {
			if _, ok := c[banned]; ok {
				t.Fatalf("card carries %s", banned)
			}
		}
	}
	golden(t, "vectors.cards.golden", out)
	code, out, _ = runCLI(t, "catalog", "cards", "--text", "--catalog", "testdata/vectors.jsonl")
	if code != 0 {
		t.Fatal(code)
	}
	golden(t, "vectors.cards.txt.golden", out)
}

func TestCatalogLint(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"server":"s","name":"x","inputSchema":{"type":7}}`+"\n"+`{"server":"s","name":"with space"}`+"\n"), 0o644)
	code, out, _ := runCLI(t, "catalog", "lint", "--catalog", bad)
	if code != 0 || !strings.Contains(out, "1 errors, 4 warnings") || !strings.Contains(out, "SCHEMA_INVALID") || !strings.Contains(out, "NAME_MAPPED") {
		t.Fatalf("lenient lint: exit %d\n%s", code, out)
	}
	code, out, errs := runCLI(t, "catalog", "lint", "--strict", "--catalog", bad)
	if code != 1 || !strings.Contains(out, "SCHEMA_INVALID") || !strings.Contains(errs, "rejected") {
		t.Fatalf("strict lint: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "catalog", "lint", "--json", "--catalog", "testdata/vectors.jsonl")
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep["tools"].(float64) != 5 {
		t.Fatalf("json lint: exit %d\n%s", code, out)
	}
}

func TestCatalogErrors(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "m.jsonl")
	os.WriteFile(malformed, []byte("{\"name\":\"a\"}\n{\"name\":\n"), 0o644)
	unknown := filepath.Join(dir, "u.json")
	os.WriteFile(unknown, []byte(`{"servers":[]}`), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"catalog", "ids", "--catalog", filepath.Join(dir, "nope.jsonl")}, "no such file"},
		{"malformed", []string{"catalog", "ids", "--catalog", malformed}, "m.jsonl:2: malformed JSON"},
		{"unknown shape", []string{"catalog", "cards", "--catalog", unknown}, "unknown catalog shape"},
		{"no flag", []string{"catalog", "ids"}, "--catalog FILE is required"},
		{"bad flag", []string{"catalog", "ids", "--nope"}, "unknown flag"},
		{"extra arg", []string{"catalog", "ids", "x", "--catalog", malformed}, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (%s)", code, errs)
			}
			if out != "" {
				t.Fatalf("stdout not empty: %q", out)
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "quiver: ") || !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr = %q, want one line containing %q", errs, tc.want)
			}
		})
	}
}

func TestCatalogSharedVectors(t *testing.T) {
	if _, err := os.Stat("../../../shared/vectors/ids.json"); err != nil {
		t.Skip("../shared not beside the checkout")
	}
	var v struct {
		Tools []struct {
			ToolID string `json:"tool_id"`
		}
		Resources []struct {
			ResourceID string `json:"resource_id"`
		}
		Prompts []struct {
			PromptID string `json:"prompt_id"`
		}
	}
	data, _ := os.ReadFile("../../../shared/vectors/ids.json")
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "catalog", "ids", "--catalog", "../../../shared/vectors/ids.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var want []string
	for _, x := range v.Tools {
		want = append(want, x.ToolID)
	}
	for _, x := range v.Resources {
		want = append(want, x.ResourceID)
	}
	for _, x := range v.Prompts {
		want = append(want, x.PromptID)
	}
	for _, id := range want {
		if !strings.Contains(out, `"tool_id":"`+id+`"`) {
			t.Errorf("vector %s not printed", id)
		}
	}
}
