package runtime

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/units"
)

// TestProbe connects a live upstream (at a pinned protocol), a static
// catalog and a dead upstream once: each is reported in configuration
// order, the live one with its protocol, serverInfo and annotated tools,
// the dead one with its error.
func TestProbe(t *testing.T) {
	cfg := config.Default()
	cfg.Environment = guard.EnvDev
	cfg.StateDir = t.TempDir()
	live := liveUpstream("alpha", "-version", "2.1.0").cfg
	live.Protocol = "2025-11-25"
	static := newUpstream("fleet")
	static.Catalog = filepath.Join("testdata", "fleet.json")
	dead := newUpstream("dead")
	dead.Command = []string{filepath.Join(t.TempDir(), "no-such-server")}
	dead.ConnectTimeout = units.Duration(300 * time.Millisecond)
	dead.Sandbox = &config.Sandbox{Off: "test fixture"}
	off := newUpstream("off")
	off.Command = []string{"never-started"}
	off.Enabled = false
	cfg.Upstreams = []config.Upstream{live, static, dead, off}

	res, err := Probe(context.Background(), cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Name != "alpha" || res[1].Name != "fleet" || res[2].Name != "dead" {
		t.Fatalf("results %+v", res)
	}
	a := res[0]
	if a.Err != nil || a.Transport != "command" || a.Protocol != "2025-11-25" || a.ServerName != "alpha" || a.ServerVersion != "2.1.0" {
		t.Fatalf("alpha: %+v", a)
	}
	var add *catalog.ToolDef
	for i := range a.Tools {
		if a.Tools[i].Name == "add" {
			add = &a.Tools[i]
		}
	}
	if add == nil || add.Annotations["readOnlyHint"] != true || len(add.InputSchema) == 0 {
		t.Fatalf("alpha's add: %+v", add)
	}
	if f := res[1]; f.Err != nil || f.Transport != "catalog" || f.Protocol != "" || len(f.Tools) == 0 {
		t.Fatalf("fleet: %+v", f)
	}
	if d := res[2]; d.Err == nil || len(d.Tools) != 0 {
		t.Fatalf("dead: %+v", d)
	}

	// A configuration the runtime refuses is an error, not a result.
	cfg.Environment = guard.EnvProd
	cfg.Upstreams = []config.Upstream{func() config.Upstream { u := liveUpstream("bare").cfg; u.Sandbox = nil; return u }()}
	if _, err := Probe(context.Background(), cfg, Deps{}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("prod without a sandbox: %v", err)
	}
}
