package mcpimport

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// FuzzConvert: any input converts or fails with an *Error, never a panic,
// and a converted file's YAML is produced.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	more, _ := filepath.Glob("testdata/*/.*/*.json")
	dot, _ := filepath.Glob("testdata/*/.mcp.json")
	for _, p := range append(append(files, more...), dot...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"servers": {"a": {"url": "https://h/${input:x}", "headers": {"A": "b ${env:C}"}}}, "inputs": [{"id": "x"}]}`))
	f.Add([]byte(`{/* c */ "mcpServers": {"a": {"command": "~/x", "args": ["${", "./a.js", "http://h:1/"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := Options{Skeleton: true, Environment: "prod", Home: "/h", Workspace: "/w", OutDir: "/o", Exists: func(string) bool { return true }}
		res, err := Convert("f.json", data, o)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		// Whatever the names, values and paths, the YAML reads back
		// with every server, its name and its command as converted.
		var doc struct {
			Upstreams []struct {
				Name    string   `yaml:"name"`
				Command []string `yaml:"command"`
			} `yaml:"upstreams"`
		}
		if err := yaml.Unmarshal(res.YAML, &doc); err != nil {
			t.Fatalf("the YAML does not parse: %v\n%s", err, res.YAML)
		}
		if len(doc.Upstreams) != res.Servers {
			t.Fatalf("%d upstreams in the YAML, %d servers", len(doc.Upstreams), res.Servers)
		}
		for i, u := range doc.Upstreams {
			if u.Name == "" || !strings.Contains(res.Origins[i], u.Name) && !strings.Contains(res.Origins[i], strconv.Quote(u.Name)) {
				t.Fatalf("upstream %d is %q, from %s", i, u.Name, res.Origins[i])
			}
		}
		_ = Detect(data)
	})
}
