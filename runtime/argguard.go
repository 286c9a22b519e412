package runtime

import (
	"context"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/argguard"
	"github.com/quiver-mcp/quiver/runtime/config"
)

// refusalError is an argument guard's refusal on the wire; a guard's
// reason codes go in its details (and, by checkArgGuards, the receipt).
func refusalError(g *argguard.Refusal) *Error {
	e := newError(g.Code, "%s", g.Message).withPath(g.Path)
	if g.Arg != "" {
		e.withDetail("arg", g.Arg)
	}
	if g.Host != "" {
		e.withDetail("host", g.Host)
	}
	if len(g.Reasons) > 0 {
		e.withDetail("reason_codes", g.Reasons)
	}
	if len(g.Unknown) > 0 {
		e.withDetail("unknown_args", g.Unknown)
		e.quiet = true // the names are the caller's own
	}
	return e
}

// argGuardsOf returns the guards configured for the upstream serving
// server (nil when none).
func (r *Runtime) argGuardsOf(st *state, server string) (*config.Workspace, *config.Egress) {
	if e := st.owner[server]; e != nil {
		return e.workspace, e.egress
	}
	return nil, nil
}

// checkArgGuards runs the workspace and egress guards of the call's
// upstream, recording them as the dry-run checks "workspace" and "egress"
// when configured. A refusal notes its reason codes for the receipt.
func (r *Runtime) checkArgGuards(ctx context.Context, st *state, server string, args map[string]any, v *verdicts) *Error {
	ws, eg := r.argGuardsOf(st, server)
	run := func(name string, g *argguard.Refusal) *Error {
		var e *Error
		if g != nil {
			e = refusalError(g)
			if c := callerOf(ctx); c != nil && !v.dry {
				c.reasons = append(c.reasons, g.Reasons...)
			}
		}
		return v.record(name, false, e)
	}
	if ws != nil {
		if e := run("workspace", argguard.Workspace(ws, args)); e != nil {
			return e
		}
	}
	if eg != nil {
		if e := run("egress", argguard.Egress(eg, args)); e != nil {
			return e
		}
	}
	return nil
}

// checkStrictArgs refuses argument names the tool's input schema does not
// declare, when strict_args holds for its upstream (recorded as the dry-run
// check "strict_args" then).
func (r *Runtime) checkStrictArgs(ctx context.Context, st *state, it *catalog.Item, args map[string]any, v *verdicts) *Error {
	if e := st.owner[it.Server]; e == nil || !e.strict {
		return nil
	}
	var e *Error
	if g := argguard.Strict(it.CallSchema(), args); g != nil {
		e = refusalError(g)
		if c := callerOf(ctx); c != nil && !v.dry {
			c.reasons = append(c.reasons, g.Reasons...)
		}
	}
	return v.record("strict_args", false, e)
}
