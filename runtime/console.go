package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/upstream"
	"github.com/quiver-mcp/quiver/toolid"
)

// consoleFleet is the runtime as the operator console sees it (admin.Fleet).
type consoleFleet struct{ r *Runtime }

// Upstreams lists the enabled upstreams in configuration order with their
// state, catalog counts and recent calls.
func (f consoleFleet) Upstreams(_ context.Context) []admin.Upstream {
	r := f.r
	st := r.state.Load()
	type counts struct{ tools, resources, prompts int }
	per := map[*upstreamEntry]*counts{}
	// Items count for the entry that serves them (a static catalog may
	// serve several servers).
	for _, k := range []toolid.Kind{toolid.KindTool, toolid.KindResource, toolid.KindPrompt} {
		for _, it := range st.snap.Items(k) {
			e := st.owner[it.Server]
			if e == nil {
				continue
			}
			c := per[e]
			if c == nil {
				c = &counts{}
				per[e] = c
			}
			switch k {
			case toolid.KindTool:
				c.tools++
			case toolid.KindResource:
				c.resources++
			default:
				c.prompts++
			}
		}
	}
	live := map[string]upstream.State{}
	for _, c := range r.clients() {
		live[c.Name()] = c.State()
	}
	since := time.Now().Add(-admin.RecentWindow)
	var out []admin.Upstream
	for _, e := range r.upstreams() {
		name := e.name()
		up := admin.Upstream{Name: name, Status: "ready", Trust: e.trust, Risk: e.risk, Recent: r.met.recent.Since(name, since)}
		up.Transport = e.cfg.Transport()
		if e.sandbox.Mode != "" {
			up.Sandbox = e.sandbox.Mode
			if e.sandbox.Detail != "" {
				up.Sandbox += ": " + e.sandbox.Detail
			}
		}
		if s, ok := live[name]; ok {
			up.Status, up.Since, up.Protocol = string(s.Status), s.Since, s.Protocol
			if s.Err != nil {
				up.Reason = sanitize(s.Err.Error())
			}
		}
		if c := per[e]; c != nil {
			up.Tools, up.Resources, up.Prompts = c.tools, c.resources, c.prompts
		}
		out = append(out, up)
	}
	return out
}

// as is the context of a console request made as principal p: the policy
// and the incident state decide for p as for a caller of its own.
func as(ctx context.Context, p identity.Principal) context.Context {
	return withCaller(ctx, &caller{p: p, jwt: !p.IsZero()})
}

// Browse is tool_browse for principal p.
func (f consoleFleet) Browse(ctx context.Context, p identity.Principal, q admin.BrowseQuery) (admin.BrowsePage, error) {
	a := browseArgs{Cursor: q.Cursor}
	if q.TopK > 0 {
		a.TopK = &q.TopK
	}
	if q.Query != "" {
		a.Query = &q.Query
	} else {
		a.Path = &q.Path
	}
	res, e := f.r.browse(as(ctx, p), nil, toolid.KindTool, a)
	if e != nil {
		return admin.BrowsePage{}, errors.New(e.Message)
	}
	var br browseResult
	data, _ := res.StructuredContent.(json.RawMessage)
	if err := json.Unmarshal(data, &br); err != nil {
		return admin.BrowsePage{}, err
	}
	return admin.BrowsePage{Cards: br.Cards, NextCursor: br.NextCursor, Total: br.Total}, nil
}

// Tool is tool_hydrate for principal p, with the policy's decisions.
func (f consoleFleet) Tool(ctx context.Context, p identity.Principal, id string) (admin.ToolDetail, bool) {
	r := f.r
	ctx = as(ctx, p)
	st := r.state.Load()
	it, ok := lookupTool(st, id)
	if !ok || it.Kind != toolid.KindTool || !r.visible(ctx, st, it) {
		return admin.ToolDetail{}, false
	}
	h, err := st.snap.Hydrate(it.ID)
	if err != nil {
		return admin.ToolDetail{}, false
	}
	info := r.upstreamOf(st, it.Server)
	d := admin.ToolDetail{ID: it.ID, Server: it.Server, UpstreamName: it.UpstreamName, Description: h.Description,
		InputSchema: indent(h.InputSchema), OutputSchema: indent(h.OutputSchema), Class: string(guard.ClassUnclassified),
		Trust: info.trust, Risk: info.risk}
	if reg := st.gate.Registry(); reg != nil {
		d.RegistryVersion = reg.Version()
		if pol, ok := reg.Lookup(it.Server, it.UpstreamName); ok {
			d.Class = string(pol.Class)
		}
	}
	for _, action := range []string{policy.ActionList, policy.ActionCall} {
		dec := r.decide(ctx, st, it, action)
		d.Decisions = append(d.Decisions, admin.Decision{Action: action, Effect: string(dec.Effect), PolicyID: dec.PolicyID,
			RuleID: dec.RuleID, Reasons: dec.ReasonCodes})
	}
	return d, true
}

// indent pretty-prints a schema for a page ("" for none).
func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

var _ admin.Fleet = consoleFleet{}
