package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/firewall"
)

// ownerOf is the principal key that scopes artifacts and idempotency
// records: an artifact is visible only to the principal whose call produced
// it. A verified token's principal owns by its key (identity.Principal.Key,
// stable across tokens and sessions); over stdio the process owner is the
// trust boundary (the local principal); over HTTP without auth each MCP
// session is its own anonymous principal, and a request without a session
// (a sessionless revision) owns only what it produced itself.
func (r *Runtime) ownerOf(ctx context.Context, ss *mcp.ServerSession) string {
	c := callerOf(ctx)
	switch {
	case c != nil && c.jwt:
		return c.p.Key()
	case c != nil && c.local:
		return "local:" + r.localName
	case ss != nil && ss.ID() != "":
		return "session:" + ss.ID()
	case c != nil:
		return c.anonymousOwner()
	}
	return "local:" + r.localName
}

// toFirewall converts MCP content into the firewall's plain parts.
func toFirewall(content []mcp.Content, structured any, isError bool) firewall.Result {
	res := firewall.Result{IsError: isError}
	for _, c := range content {
		res.Parts = append(res.Parts, partOf(c))
	}
	if structured != nil {
		if b, err := json.Marshal(structured); err == nil && string(b) != "null" {
			res.Structured = b
		}
	}
	return res
}

func partOf(c mcp.Content) firewall.Part {
	raw, _ := json.Marshal(c)
	p := firewall.Part{Raw: raw}
	switch v := c.(type) {
	case *mcp.TextContent:
		p.Type, p.Text = firewall.PartText, v.Text
	case *mcp.ImageContent:
		p.Type, p.Data, p.MIMEType = firewall.PartImage, v.Data, v.MIMEType
	case *mcp.AudioContent:
		p.Type, p.Data, p.MIMEType = firewall.PartAudio, v.Data, v.MIMEType
	case *mcp.EmbeddedResource:
		p.Type = firewall.PartResource
		if v.Resource != nil {
			p.Text, p.Data, p.MIMEType, p.URI = v.Resource.Text, v.Resource.Blob, v.Resource.MIMEType, v.Resource.URI
		}
	case *mcp.ResourceLink:
		p.Type, p.URI, p.Name, p.MIMEType = firewall.PartResourceLink, v.URI, v.Name, v.MIMEType
	}
	return p
}

// resourceParts converts resource contents into parts.
func resourceParts(contents []*mcp.ResourceContents) []firewall.Part {
	parts := make([]firewall.Part, 0, len(contents))
	for _, rc := range contents {
		raw, _ := json.Marshal(rc)
		parts = append(parts, firewall.Part{Type: firewall.PartResource, Text: rc.Text, Data: rc.Blob, MIMEType: rc.MIMEType, URI: rc.URI, Raw: raw})
	}
	return parts
}

// promptParts converts rendered prompt messages into parts; Raw keeps the
// role with the content.
func promptParts(msgs []*mcp.PromptMessage) []firewall.Part {
	parts := make([]firewall.Part, 0, len(msgs))
	for _, m := range msgs {
		p := partOf(m.Content)
		p.Raw, _ = json.Marshal(m)
		parts = append(parts, p)
	}
	return parts
}

// shape passes a result through the firewall into an envelope.
func (r *Runtime) shape(ctx context.Context, ss *mcp.ServerSession, it *catalog.Item, res firewall.Result, took time.Duration) (firewall.Envelope, *Error) {
	env := newEnvelope(it, res.IsError, took)
	if r.fw == nil {
		inlineEnvelope(&env, res)
		return env, nil
	}
	out, err := r.fw.Apply(ctx, r.ownerOf(ctx, ss), res)
	if err != nil {
		if errors.Is(err, artifacts.ErrTooLarge) {
			return env, newError(CodeResultTooLarge, "the result is larger than the artifact store allows").withCause(err)
		}
		return env, newError(CodeInternal, "storing the result failed").withCause(err)
	}
	out.Fill(&env)
	return env, nil
}

// bareEnvelope is the envelope of a result that passes the firewall by:
// kept for the idempotency record of a direct call.
func bareEnvelope(it *catalog.Item, res firewall.Result, took time.Duration) firewall.Envelope {
	env := newEnvelope(it, res.IsError, took)
	inlineEnvelope(&env, res)
	return env
}

// newEnvelope is the envelope of one result of it, before the firewall
// fills it.
func newEnvelope(it *catalog.Item, isError bool, took time.Duration) firewall.Envelope {
	env := firewall.Envelope{
		Status:    firewall.StatusOK,
		Facts:     []string{},
		Artifacts: []firewall.Artifact{},
		Views:     []firewall.View{},
		Provenance: firewall.Provenance{ToolID: it.ID, Server: it.Server, UpstreamName: it.UpstreamName, Attempts: 1,
			DurationMS: float64(took.Microseconds()) / 1000},
	}
	if isError {
		env.Status = firewall.StatusError
	}
	return env
}

// inlineEnvelope carries a result whole, for a runtime whose firewall is
// turned off.
func inlineEnvelope(env *firewall.Envelope, res firewall.Result) {
	in := &firewall.Inline{Content: make([]json.RawMessage, 0, len(res.Parts)), StructuredContent: res.Structured}
	for _, p := range res.Parts {
		in.Content = append(in.Content, p.Raw)
		env.Firewall.OriginalBytes += int64(len(p.Raw))
	}
	env.Firewall.OriginalBytes += int64(len(res.Structured))
	env.Firewall.Strategy = "inline"
	env.Result = in
	env.Summary = fmt.Sprintf("%d content item(s)", len(res.Parts))
}

func envelopeResult(env firewall.Envelope, isError bool) *mcp.CallToolResult {
	out := structured(env, "")
	out.IsError = isError
	return out
}
