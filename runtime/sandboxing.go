package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/egress"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/toolid"
)

// sandboxSpec completes the stdio part of spec for command upstream u:
// its sandbox policy (refused in prod when missing, checked to be
// possible on this host), the values of its sandbox.env names, its
// private HOME, and the launcher runtime/upstream asks for its command.
func (r *Runtime) sandboxSpec(u *config.Upstream, spec *upstream.Spec) error {
	if len(u.Command) == 0 {
		return nil
	}
	pol := u.SandboxPolicy()
	switch {
	case pol == nil && r.cfg.Environment == guard.EnvProd:
		return fmt.Errorf("upstream %q: environment prod refuses a command upstream without a sandbox; add sandbox: {fs: {write: [...]}, net: none} or sandbox: {off: \"<reason>\"}", u.Name)
	case pol == nil:
		r.log.Warn("command upstream runs without a sandbox (environment dev); add a sandbox block", "upstream", u.Name)
	case pol.Off != "":
		r.log.Warn("command upstream runs with its sandbox off", "upstream", u.Name, "reason", pol.Off)
	}
	rcpt, trust := sandboxReceipt(u), string(u.TrustLevel)
	l := sandbox.New(sandbox.Options{Logger: r.log, OnEgressDenied: func(name, host, port, reason string) {
		r.egressDenied(name, trust, rcpt, host, port)
	}, EgressBlocked: func(ctx context.Context) bool {
		// Set by Start before any upstream runs (fail closed if not).
		in := r.auth.incident
		return in == nil || in.EgressBlocked(ctx)
	}})
	if err := l.Check(context.Background(), sandbox.Spec{Name: u.Name, Dir: u.Dir, Policy: pol}); err != nil {
		return err
	}
	if pol != nil && pol.Off == "" {
		a := sandbox.Describe(pol)
		r.log.Info("command upstream sandboxed", "upstream", u.Name, "sandbox", a.Mode, "fs", a.Detail)
	}
	if u.Sandbox != nil {
		for _, name := range u.Sandbox.Env {
			if v, ok := r.deps.Getenv(name); ok {
				spec.Env = append(spec.Env, name+"="+v)
			} else {
				r.log.Debug("sandbox.env variable not set; skipped", "upstream", u.Name, "name", name)
			}
		}
	}
	spec.Sandbox, spec.Launcher = pol, l
	if r.cfg.StateDir != "" && (pol == nil || pol.Off != "") {
		spec.Home = filepath.Join(r.cfg.StateDir, "home", toolid.Namespace(u.Name))
	}
	return nil
}

// sandboxReceipt is what receipts of calls to u's tools record in
// sandbox: the isolation applied to a command upstream; none for other
// transports.
func sandboxReceipt(u *config.Upstream) receipts.Sandbox {
	if len(u.Command) == 0 {
		return receipts.Sandbox{FSPolicy: "none", NetPolicy: "none"}
	}
	a := sandbox.Describe(u.SandboxPolicy())
	return receipts.Sandbox{FSPolicy: a.FS, NetPolicy: a.Net, Mode: a.Mode, Detail: a.Detail}
}

// egressDenied writes the receipt of a destination the egress proxy of
// sandboxed upstream name refused (spec 001 test 8): method egress, deny,
// EGRESS_BLOCKED and the sha256 prefix of host:port (not the host itself).
func (r *Runtime) egressDenied(name, trust string, sb receipts.Sandbox, host, port string) {
	c := &caller{}
	c.begin("egress", nil, time.Now())
	c.rc.MCP.ServerID, c.rc.MCP.TrustLevel, c.rc.Sandbox = name, trust, sb
	c.reasons = []string{egress.HostReason(host + ":" + port)}
	r.rec.write(c, nil, &Error{Code: codes.EgressBlocked, Message: "the sandbox's egress proxy refused a destination"}, 0)
}
