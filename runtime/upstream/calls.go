//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated in protocol 2026-07-28 only; upstreams on earlier protocols (all Node servers) still use them.

package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

// acquire returns the live session, waiting (bounded by ctx) while the
// client is connecting. It fails at once while the client is down or closed.
func (c *Client) acquire(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		st, s, changed := c.state, c.cur, c.changed
		c.mu.Unlock()
		switch st.Status {
		case StatusReady:
			return s, nil
		case StatusClosed:
			if errors.Is(st.Err, ErrInvalidSpec) {
				return nil, newError(codes.UpstreamError, fmt.Errorf("upstream %q: %w", c.spec.Name, st.Err))
			}
			return nil, newError(codes.UpstreamUnavailable, fmt.Errorf("upstream %q: %w", c.spec.Name, ErrClosed))
		case StatusDown:
			return nil, c.notConnected(st.Err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), ErrCallTimeout) {
				return nil, newError(codes.UpstreamError, context.Cause(ctx))
			}
			return nil, c.notConnected(fmt.Errorf("still %s: %w", st.Status, context.Cause(ctx)))
		}
	}
}

// notConnected builds the error for a call made while there is no session.
// A credential or throttling failure behind the outage keeps its code.
func (c *Client) notConnected(last error) *Error {
	err := fmt.Errorf("upstream %q: %w", c.spec.Name, ErrNotConnected)
	if last != nil {
		err = fmt.Errorf("upstream %q: %w: %w", c.spec.Name, ErrNotConnected, last)
	}
	var le *Error
	if errors.As(last, &le) {
		switch le.Code {
		case codes.AuthFailed, codes.PermissionDenied, codes.RateLimited:
			return &Error{Code: le.Code, Retryable: le.Retryable, Err: err, HTTPStatus: le.HTTPStatus, RetryAfter: le.RetryAfter}
		}
	}
	return newError(codes.UpstreamUnavailable, err)
}

// do runs f against the live session with the per-call timeout applied and
// the call bound to the session's lifetime, and classifies its error.
func do[T any](c *Client, ctx context.Context, op string, f func(context.Context, *mcp.ClientSession) (T, error)) (T, error) {
	var zero T
	tctx, cancelTimeout := context.WithTimeoutCause(ctx, c.callTimeout, ErrCallTimeout)
	defer cancelTimeout()
	s, err := c.acquire(tctx)
	if err != nil {
		return zero, err
	}
	s.calls.Add(1)
	defer s.calls.Add(-1)
	cctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	defer stop()
	cctx, probe := withProbe(cctx)

	res, err := f(cctx, s.cs)
	if err == nil {
		c.drain(ctx, s)
		return res, nil
	}
	e := classify(ctx, cctx, probe, s.isEnded(), err)
	e.Err = fmt.Errorf("upstream %q: %s: %w", c.spec.Name, op, e.Err)
	if e.Code == codes.UpstreamUnavailable {
		s.markBroken(e)
	}
	if e.Code != codes.UpstreamError {
		c.logger.Debug("upstream call failed", "op", op, "code", e.Code, "err", e.Err)
	}
	return zero, e
}

// paginate collects every page of a list method.
func paginate[R any, T any](ctx context.Context, list func(context.Context, string) (R, error), items func(R) ([]T, string)) ([]T, error) {
	var out []T
	seen := map[string]bool{}
	cursor := ""
	for range maxListPages {
		res, err := list(ctx, cursor)
		if err != nil {
			return nil, err
		}
		page, next := items(res)
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("pagination cursor %q repeated", next)
		}
		seen[next] = true
		cursor = next
	}
	return nil, fmt.Errorf("more than %d pages", maxListPages)
}

// capable reports whether the current session's server advertised the
// capability picked by has. Unknown (no session) counts as capable, so the
// call itself reports the outage.
func (c *Client) capable(has func(*mcp.ServerCapabilities) bool) bool {
	res := c.InitializeResult()
	if res == nil || res.Capabilities == nil {
		return res == nil
	}
	return has(res.Capabilities)
}

// ListTools returns every tool of the upstream (all pages).
func (c *Client) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	return do(c, ctx, "tools/list", func(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
		return paginate(ctx, func(ctx context.Context, cursor string) (*mcp.ListToolsResult, error) {
			return cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		}, func(r *mcp.ListToolsResult) ([]*mcp.Tool, string) { return r.Tools, r.NextCursor })
	})
}

// ListResources returns every resource of the upstream (all pages), or nil
// when the server did not advertise the resources capability.
func (c *Client) ListResources(ctx context.Context) ([]*mcp.Resource, error) {
	if !c.capable(func(sc *mcp.ServerCapabilities) bool { return sc.Resources != nil }) {
		return nil, nil
	}
	return do(c, ctx, "resources/list", func(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Resource, error) {
		return paginate(ctx, func(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
			return cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		}, func(r *mcp.ListResourcesResult) ([]*mcp.Resource, string) { return r.Resources, r.NextCursor })
	})
}

// ListResourceTemplates returns every resource template of the upstream (all
// pages), or nil when the server did not advertise the resources capability.
func (c *Client) ListResourceTemplates(ctx context.Context) ([]*mcp.ResourceTemplate, error) {
	if !c.capable(func(sc *mcp.ServerCapabilities) bool { return sc.Resources != nil }) {
		return nil, nil
	}
	return do(c, ctx, "resources/templates/list", func(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.ResourceTemplate, error) {
		return paginate(ctx, func(ctx context.Context, cursor string) (*mcp.ListResourceTemplatesResult, error) {
			return cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		}, func(r *mcp.ListResourceTemplatesResult) ([]*mcp.ResourceTemplate, string) {
			return r.ResourceTemplates, r.NextCursor
		})
	})
}

// ListPrompts returns every prompt of the upstream (all pages), or nil when
// the server did not advertise the prompts capability.
func (c *Client) ListPrompts(ctx context.Context) ([]*mcp.Prompt, error) {
	if !c.capable(func(sc *mcp.ServerCapabilities) bool { return sc.Prompts != nil }) {
		return nil, nil
	}
	return do(c, ctx, "prompts/list", func(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Prompt, error) {
		return paginate(ctx, func(ctx context.Context, cursor string) (*mcp.ListPromptsResult, error) {
			return cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		}, func(r *mcp.ListPromptsResult) ([]*mcp.Prompt, string) { return r.Prompts, r.NextCursor })
	})
}

// CallTool calls the upstream tool name with args. A result with isError
// set is returned as a result, not as an error. Cancelling ctx cancels the
// call upstream (the go-sdk sends notifications/cancelled).
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	return c.CallToolParams(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// CallToolParams is CallTool with full control of the request parameters,
// for example a _meta progressToken (see Options.OnProgress).
func (c *Client) CallToolParams(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	p := *params // the go-sdk adds _meta entries to the params it is given
	p.Meta = maps.Clone(params.Meta)
	if p.Arguments == nil {
		p.Arguments = map[string]any{}
	}
	return do(c, ctx, fmt.Sprintf("tools/call %q", p.Name), func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return rounds(ctx, c, cs, toolAsks, func(answers mcp.InputResponseMap, state string) (*mcp.CallToolResult, error) {
			q := p
			if answers != nil {
				q.InputResponses, q.RequestState = answers, state
			}
			return cs.CallTool(ctx, &q)
		})
	})
}

// ReadResource reads the resource at uri.
func (c *Client) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return c.ReadResourceParams(ctx, &mcp.ReadResourceParams{URI: uri})
}

// GetPrompt renders the prompt name with args.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	return c.GetPromptParams(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
}

// Ping checks that the upstream answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := do(c, ctx, "ping", func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Ping(ctx, nil)
	})
	return err
}

// Complete asks the upstream to complete a prompt or resource-template
// argument.
func (c *Client) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return do(c, ctx, "completion/complete", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
		return cs.Complete(ctx, params)
	})
}

// Subscribe subscribes to updates of the resource at uri; updates arrive at
// Options.OnResourceUpdated. A subscription lives as long as the upstream
// session: after a reconnect the caller subscribes again.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	_, err := do(c, ctx, "resources/subscribe", func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
	return err
}

// Unsubscribe ends a subscription made with Subscribe.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	_, err := do(c, ctx, "resources/unsubscribe", func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
	return err
}

// SetLoggingLevel asks the upstream to send log notifications from level
// up. It does nothing when the upstream does not advertise logging.
func (c *Client) SetLoggingLevel(ctx context.Context, level mcp.LoggingLevel) error {
	if !c.capable(func(sc *mcp.ServerCapabilities) bool { return sc.Logging != nil }) {
		return nil
	}
	_, err := do(c, ctx, "logging/setLevel", func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		//lint:ignore SA1019 logging is deprecated in protocol 2026-07-28 only.
		return struct{}{}, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	})
	return err
}

// GetPromptParams is GetPrompt with full control of the request
// parameters (a _meta progressToken, for example).
func (c *Client) GetPromptParams(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	p := *params
	p.Meta = maps.Clone(params.Meta)
	return do(c, ctx, fmt.Sprintf("prompts/get %q", p.Name), func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return rounds(ctx, c, cs, promptAsks, func(answers mcp.InputResponseMap, state string) (*mcp.GetPromptResult, error) {
			q := p
			if answers != nil {
				q.InputResponses, q.RequestState = answers, state
			}
			return cs.GetPrompt(ctx, &q)
		})
	})
}

// ReadResourceParams is ReadResource with full control of the request
// parameters.
func (c *Client) ReadResourceParams(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	p := *params
	p.Meta = maps.Clone(params.Meta)
	return do(c, ctx, "resources/read", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return rounds(ctx, c, cs, resourceAsks, func(answers mcp.InputResponseMap, state string) (*mcp.ReadResourceResult, error) {
			q := p
			if answers != nil {
				q.InputResponses, q.RequestState = answers, state
			}
			return cs.ReadResource(ctx, &q)
		})
	})
}
