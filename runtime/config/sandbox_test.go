package config

import (
	"strings"
	"testing"
	"time"
)

func TestSandboxBlock(t *testing.T) {
	fixedEnv(t)
	for _, c := range []struct{ name, src, want string }{
		{"off excludes", "upstreams:\n  - name: a\n    command: [x]\n    sandbox: {off: why, fs: {read: [/x]}}", "upstreams[0].sandbox.fs: off turns the sandbox off; remove fs or off"},
		{"not command", "upstreams:\n  - name: a\n    url: https://x.example/mcp\n    sandbox: {net: none}", "upstreams[0].sandbox: is only valid with command"},
		{"net word", "upstreams:\n  - name: a\n    command: [x]\n    sandbox: {net: all}", "upstreams[0].sandbox.net"},
		{"allow entry", "upstreams:\n  - name: a\n    command: [x]\n    sandbox: {net: {allow: [\"http://x\"]}}", "upstreams[0].sandbox.net.allow[0]: must be a host name"},
		{"env name", "upstreams:\n  - name: a\n    command: [x]\n    sandbox: {env: [\"A-B\"]}", "upstreams[0].sandbox.env[0]"},
		{"cpu zero", "upstreams:\n  - name: a\n    command: [x]\n    sandbox: {limits: {cpu_time: \"0\"}}", "upstreams[0].sandbox.limits.cpu_time: must be greater than 0"},
	} {
		_, err := Parse("quiver.yaml", []byte(c.src), "/etc/quiver")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	cfg, err := Parse("quiver.yaml", []byte("upstreams:\n  - name: a\n    command: [x]\n    dir: w\n    workspace: {roots: [w]}\n    sandbox: {fs: {write: [out]}, net: none}\n"), "/etc/quiver")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Upstreams[0].SandboxPolicy()
	if strings.Join(p.Write, ",") != "/etc/quiver/out,/etc/quiver/w" || len(p.Allow) != 0 || p.Limits.CPUTime != time.Hour || p.Limits.Memory != 1<<30 {
		t.Errorf("policy = %+v", p)
	}
	if p := (&Upstream{Sandbox: &Sandbox{Off: "r"}}).SandboxPolicy(); p.Off != "r" {
		t.Errorf("off policy = %+v", p)
	}
	if (&Upstream{}).SandboxPolicy() != nil {
		t.Error("no block, a policy")
	}
}
