package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EProtocol20251125 runs the journey with protocol 2025-11-25 on both
// sides, as Node clients and servers speak it, over stdio and HTTP; the
// other e2e tests use the go-sdk's newer default.
func TestE2EProtocol20251125(t *testing.T) {
	const version = "2025-11-25"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "quiver.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`environment: dev
state_dir: %s
upstreams:
  - name: alpha
    command: [%q, "-name", "alpha", "-max-protocol", %q]
`, filepath.Join(dir, "state"), upstreamBin, version)), 0o644)

	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	check := func(t *testing.T, cs *mcp.ClientSession) {
		t.Helper()
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("negotiated %s, want %s", got, version)
		}
		journey(t, cs)
	}
	t.Run("stdio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.Command(quiverBin, "serve", "--config", cfg)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})
	t.Run("http", func(t *testing.T) {
		srv := startHTTP(t, "--config", cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})
}
