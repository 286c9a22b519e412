package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/toolid"
)

// servers lists the servers of the catalog served.
func servers(rt *Runtime) []string {
	var out []string
	for _, it := range rt.Snapshot().Items(toolid.KindTool) {
		if !slices.Contains(out, it.Server) {
			out = append(out, it.Server)
		}
	}
	slices.Sort(out)
	return out
}

// TestApply: a new configuration adds and removes upstreams (live and
// static) while a session stays connected; settings that cannot change
// live are reported and kept; a configuration that does not check out
// changes nothing.
func TestApply(t *testing.T) {
	extra := staticUpstream("extra", "", []string{"extra_tool"}, nil, nil)
	rg := setup(t, config.ModeGateway, append(staticFleet(t), liveUpstream("alpha")), func(r *rig) {
		r.deps.Catalogs["extra"] = *extra.src
	})
	rt, cs := startRuntime(t, rg)
	ctx := context.Background()
	if got := servers(rt); !slices.Contains(got, "alpha") || slices.Contains(got, "extra") {
		t.Fatalf("served at start: %v", got)
	}

	next := *rg.cfg
	next.Upstreams = []config.Upstream{rg.cfg.Upstreams[0], extra.cfg, liveUpstream("beta").cfg}
	next.Listen.Addr = "127.0.0.1:9"
	a, err := rt.Apply(ctx, &next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Added, []string{"extra", "beta"}) || !slices.Equal(a.Removed, []string{"alpha"}) || len(a.Changed) != 0 {
		t.Fatalf("applied %+v", a)
	}
	if !slices.Equal(a.Kept, []string{"listen"}) || rt.cfg.Listen.Addr == "127.0.0.1:9" {
		t.Fatalf("kept %v, listen %s", a.Kept, rt.cfg.Listen.Addr)
	}
	if got := servers(rt); !slices.Contains(got, "beta") || !slices.Contains(got, "extra") || slices.Contains(got, "alpha") {
		t.Fatalf("served after Apply: %v", got)
	}
	// The session connected before the reload goes on.
	if _, m := call(t, cs, ToolHydrate, map[string]any{"tool_id": "beta:echo"}); !strings.HasPrefix(m["id"].(string), "beta:echo#") {
		t.Fatalf("hydrate beta:echo: %v", m)
	}

	// The same configuration again changes no upstream.
	if a, err := rt.Apply(ctx, &next); err != nil || len(a.Added)+len(a.Removed)+len(a.Changed) != 0 {
		t.Fatalf("re-apply: %+v %v", a, err)
	}
	// A changed entry is restarted.
	changed := next
	changed.Upstreams = slices.Clone(next.Upstreams)
	changed.Upstreams[2].Command = append(slices.Clone(changed.Upstreams[2].Command), "-version", "2.0.0")
	if a, err := rt.Apply(ctx, &changed); err != nil || !slices.Equal(a.Changed, []string{"beta"}) {
		t.Fatalf("changed beta: %+v %v", a, err)
	}

	// Rate limits change live: the session may browse once more.
	limited := changed
	limited.RateLimits = map[string]config.RateLimit{ToolBrowse: {MaxCallsPerSession: 1}}
	if _, err := rt.Apply(ctx, &limited); err != nil {
		t.Fatal(err)
	}
	call(t, cs, ToolBrowse, map[string]any{"query": "add"})
	wantError(t, cs, ToolBrowse, map[string]any{"query": "add"}, CodeRateLimited)
	if _, err := rt.Apply(ctx, &changed); err != nil {
		t.Fatal(err)
	}
	call(t, cs, ToolBrowse, map[string]any{"query": "add"})

	// A policy where there was none is no live change.
	withPolicy := changed
	withPolicy.Policy.File = filepath.Join(t.TempDir(), "policy.yaml")
	if a, err := rt.Apply(ctx, &withPolicy); err != nil || !slices.Equal(a.Kept, []string{"listen", "policy"}) || rt.auth.policy != nil {
		t.Fatalf("a policy where there was none: %+v %v", a, err)
	}

	fleetBefore, pinsBefore, limitsBefore := rt.fleet.Load(), rt.pins.Load(), rt.limits.Load()
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(c *config.Config){
		"duplicate upstream": func(c *config.Config) { c.Upstreams = append(c.Upstreams, c.Upstreams[0]) },
		"broken registry":    func(c *config.Config) { c.Registry = []string{broken} },
		"unknown mode":       func(c *config.Config) { c.Mode = "sideways" },
	} {
		c := changed
		c.Upstreams = slices.Clone(changed.Upstreams)
		bad(&c)
		if _, err := rt.Apply(ctx, &c); err == nil {
			t.Errorf("%s: applied", name)
		}
		if rt.fleet.Load() != fleetBefore || rt.pins.Load() != pinsBefore || rt.limits.Load() != limitsBefore {
			t.Fatalf("%s: the configuration in force changed", name)
		}
	}
}
