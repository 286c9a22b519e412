package main

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := runCLI(t, args...)
		if code != 0 || !regexp.MustCompile(`^quiver (devel|devel-[0-9a-f]{12}(\+dirty)?|v\S+)( \(go\S+\))?\n$`).MatchString(out) {
			t.Fatalf("%v: exit %d, %q %q", args, code, out, errs)
		}
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != 2 {
		t.Fatalf("version with an argument: exit %d", code)
	}
}

// TestServerInfoVersion: the MCP serverInfo carries the stamped version of
// a release build.
func TestServerInfoVersion(t *testing.T) {
	bin := t.TempDir() + "/quiver"
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.stamped=v9.8.7", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "quiver v9.8.7" {
		t.Fatalf("--version = %q, %v", out, err)
	}
	cmd := exec.Command(bin, "serve", "--gateway", "--catalog", "testdata/vectors.jsonl")
	cmd.Env = append(cmd.Environ(), "XDG_STATE_HOME="+t.TempDir())
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo.Version; v != "v9.8.7" {
		t.Fatalf("serverInfo.version = %q", v)
	}
}
