package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
	"github.com/quiver-mcp/quiver/toolid"
)

type executeArgs struct {
	ToolID string          `json:"tool_id"`
	Args   json.RawMessage `json:"args"`
	DryRun bool            `json:"dry_run"`
}

// hydrated is tool_hydrate's answer: the upstream definition plus quiver's
// classification of the tool.
type hydrated struct {
	catalog.Hydration
	Classification classification `json:"classification"`
}

type classification struct {
	ToolClass  string `json:"tool_class"`
	TrustLevel string `json:"trust_level"`
	Risk       string `json:"risk"`
}

// upstreamInfo is what the runtime knows about an upstream beyond its conn.
type upstreamInfo struct {
	trust, risk string
}

func (r *Runtime) upstreamOf(st *state, server string) upstreamInfo {
	info := upstreamInfo{trust: "unknown", risk: "HIGH"}
	c, ok := st.owner[server]
	if !ok {
		return info
	}
	for _, u := range r.opts.Upstreams {
		if u.Name == c.name() {
			if u.TrustLevel != "" {
				info.trust = u.TrustLevel
			}
			if u.Risk != "" {
				info.risk = u.Risk
			}
		}
	}
	return info
}

func (r *Runtime) handleExecute(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return r.instrument(ToolExecute, func() (*mcp.CallToolResult, *Error) {
		var a executeArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		return r.execute(ctx, req.Session, a)
	})
}

// execute runs the tool_execute pipeline: resolve, validate, dispatch,
// envelope. It never dispatches a call that failed an earlier step.
func (r *Runtime) execute(ctx context.Context, ss *mcp.ServerSession, a executeArgs) (*mcp.CallToolResult, *Error) {
	st := r.state.Load() // one state for the whole call (spec 003 §4.6)
	it, ok := st.snap.Lookup(a.ToolID)
	if !ok || it.Kind != toolid.KindTool {
		return nil, newError(CodeHydrateFailed, "no tool with id %q in the current catalog", a.ToolID).withPath("tool_id")
	}
	args, e := decodeToolArgs(a.Args)
	if e != nil {
		return nil, e
	}
	verr := it.ValidateArgs(args)
	if a.DryRun {
		return structured(r.dryRun(it, verr), ""), nil
	}
	if verr != nil {
		return nil, classify(verr).withPath("args")
	}
	c, ok := st.owner[it.Server]
	if !ok {
		return nil, newError(CodeUpstreamUnavailable, "the upstream of %q is not connected", it.ID)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	res, err := c.callTool(cctx, it, args)
	if err != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, newError(CodeUpstreamTimeout, "the upstream did not answer within %s", r.opts.CallTimeout).withCause(err)
		}
		return nil, classify(err).withDetail("tool_id", it.ID)
	}
	env, e := r.shape(ctx, ss, it, toFirewall(res.Content, res.StructuredContent, res.IsError), time.Since(start))
	if e != nil {
		return nil, e.withDetail("tool_id", it.ID)
	}
	// An upstream tool's own error is a tool error, not a gateway error:
	// the envelope carries it with status "error".
	return envelopeResult(env, res.IsError), nil
}

// decodeToolArgs turns the raw args of tool_execute into the decoded JSON
// value the validator and the upstream take. Absent args are {}.
func decodeToolArgs(raw json.RawMessage) (map[string]any, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, newError(CodeArgsInvalid, "args must be a JSON object").withPath("args")
	}
	if args == nil {
		args = map[string]any{}
	}
	return args, nil
}

func (r *Runtime) dryRun(it *catalog.Item, verr error) firewall.DryRun {
	report := firewall.DryRun{ToolID: it.ID, UpstreamName: it.UpstreamName, ArgsValid: verr == nil,
		Checks: []firewall.Check{{Name: "hydrate", Status: "pass"}}}
	if it.Tool != nil && it.Tool.Annotations != nil {
		report.Annotations = map[string]any{}
		for k, v := range it.Tool.Annotations {
			report.Annotations[k] = v
		}
		report.Annotations["verified"] = false
	}
	check := firewall.Check{Name: "schema_validation", Status: "pass"}
	if verr != nil {
		check.Status = "fail"
		check.Detail = classify(verr).Message
	}
	report.Checks = append(report.Checks, check)
	return report
}

type viewArgs struct {
	Handle   string          `json:"handle"`
	Selector json.RawMessage `json:"selector"`
}

func (r *Runtime) handleView(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return r.instrument(ToolView, func() (*mcp.CallToolResult, *Error) {
		var a viewArgs
		if e := decodeArgs(req.Params.Arguments, &a); e != nil {
			return nil, e
		}
		sel, err := firewall.ParseSelector(a.Selector)
		if err != nil {
			return nil, newError(CodeViewFailed, "%s", err.Error()).withPath("selector").withCause(err)
		}
		if r.fw == nil {
			return nil, newError(CodeViewFailed, "no artifact with handle %q", a.Handle).withPath("handle")
		}
		v, err := r.fw.View(ctx, r.ownerOf(req.Session), a.Handle, sel)
		if err != nil {
			if ctx.Err() != nil {
				return nil, newError(CodeViewFailed, "the view was cancelled").withCause(err)
			}
			// A foreign handle and a missing one read the same.
			if errors.Is(err, artifacts.ErrNotFound) {
				return nil, newError(CodeViewFailed, "no artifact with handle %q", a.Handle).withPath("handle").withCause(err)
			}
			return nil, newError(CodeViewFailed, "%s", err.Error()).withPath("selector").withCause(err)
		}
		text := v.Text + "\n(" + v.What
		if len(v.Next) > 0 && string(v.Next) != "null" {
			text += "; next selector: " + string(v.Next)
		}
		text += ")"
		return structured(v, text), nil
	})
}
