//lint:file-ignore SA1019 sampling and elicitation requests are what an upstream's input requests carry.

package upstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An upstream at protocol 2026-07-28 asks for input (elicitation,
// sampling, roots) with an input_required result instead of a request in
// the middle of a call (multi-round-trip requests, SEP-2322). The client
// answers such results itself unless the caller relays them: a gateway in
// front of a client at the same revision hands the input requests to that
// client and passes its answers back on the retry.

// MaxInputRounds bounds the round trips of one call the client answers
// itself, as the go-sdk's own loop does.
const MaxInputRounds = 10

// maxShedRounds bounds the rounds an upstream answers with no input
// requests at all (load shedding) before the call fails.
const maxShedRounds = 3

type relayInputKey struct{}

// RelayInput marks ctx: a call made with it returns the upstream's
// input_required result as it is, for the caller to relay; its retry
// carries the answers and the upstream's request state in its params.
func RelayInput(ctx context.Context) context.Context {
	return context.WithValue(ctx, relayInputKey{}, true)
}

func relaysInput(ctx context.Context) bool {
	v, _ := ctx.Value(relayInputKey{}).(bool)
	return v
}

// ErrInputRounds: the upstream kept asking for input past MaxInputRounds,
// or shed load too often.
var ErrInputRounds = errors.New("too many input round trips")

// rounds runs call, and while its result asks for input (and ctx does not
// relay it) answers the input requests with the client's handlers and runs
// call again with the answers and the upstream's request state.
func rounds[R any](ctx context.Context, c *Client, cs *mcp.ClientSession, asks func(R) (mcp.InputRequestMap, string, bool),
	call func(responses mcp.InputResponseMap, state string) (R, error)) (R, error) {
	res, err := call(nil, "")
	if err != nil || relaysInput(ctx) {
		return res, err
	}
	shed := 0
	for round := 1; ; round++ {
		reqs, state, ok := asks(res)
		if !ok {
			return res, nil
		}
		if len(reqs) == 0 {
			if shed++; shed >= maxShedRounds {
				var zero R
				return zero, fmt.Errorf("%w: the upstream shed load %d times", ErrInputRounds, shed)
			}
		}
		if round >= MaxInputRounds {
			var zero R
			return zero, fmt.Errorf("%w: %d rounds", ErrInputRounds, round)
		}
		answers := make(mcp.InputResponseMap, len(reqs))
		for id, ir := range reqs {
			a, err := c.answer(ctx, cs, ir)
			if err != nil {
				var zero R
				return zero, fmt.Errorf("input request %q: %w", id, err)
			}
			answers[id] = a
		}
		if res, err = call(answers, state); err != nil {
			return res, err
		}
	}
}

// answer answers one input request with the client's handlers, as the
// same request in the middle of a call would be answered.
func (c *Client) answer(ctx context.Context, cs *mcp.ClientSession, ir mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := ir.(type) {
	case *mcp.ElicitParams:
		if c.opts.OnElicit == nil {
			return nil, errors.New("elicitation is not supported")
		}
		return c.opts.OnElicit(ctx, &mcp.ElicitRequest{Session: cs, Params: p})
	case *mcp.CreateMessageParams:
		if c.opts.OnCreateMessage == nil {
			return nil, errors.New("sampling is not supported")
		}
		return c.opts.OnCreateMessage(ctx, &mcp.CreateMessageWithToolsRequest{Session: cs, Params: withTools(p)})
	case *mcp.CreateMessageWithToolsParams:
		if c.opts.OnCreateMessage == nil {
			return nil, errors.New("sampling is not supported")
		}
		return c.opts.OnCreateMessage(ctx, &mcp.CreateMessageWithToolsRequest{Session: cs, Params: p})
	case *mcp.ListRootsParams:
		if c.opts.OnListRoots != nil {
			return c.opts.OnListRoots(ctx, &mcp.ListRootsRequest{Session: cs, Params: p})
		}
		// quiver announces no roots of its own.
		return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
	}
	return nil, fmt.Errorf("unknown input request %T", ir)
}

// withTools is a sampling request in the form the handlers take.
func withTools(p *mcp.CreateMessageParams) *mcp.CreateMessageWithToolsParams {
	msgs := make([]*mcp.SamplingMessageV2, 0, len(p.Messages))
	for _, m := range p.Messages {
		msgs = append(msgs, &mcp.SamplingMessageV2{Content: []mcp.Content{m.Content}, Role: m.Role})
	}
	return &mcp.CreateMessageWithToolsParams{Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens,
		Messages: msgs, Metadata: p.Metadata, ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences,
		SystemPrompt: p.SystemPrompt, Temperature: p.Temperature}
}

func toolAsks(r *mcp.CallToolResult) (mcp.InputRequestMap, string, bool) {
	if r == nil || !r.NeedsInput() {
		return nil, "", false
	}
	return r.InputRequests, r.RequestState, true
}

func promptAsks(r *mcp.GetPromptResult) (mcp.InputRequestMap, string, bool) {
	if r == nil || !r.NeedsInput() {
		return nil, "", false
	}
	return r.InputRequests, r.RequestState, true
}

func resourceAsks(r *mcp.ReadResourceResult) (mcp.InputRequestMap, string, bool) {
	if r == nil || !r.NeedsInput() {
		return nil, "", false
	}
	return r.InputRequests, r.RequestState, true
}
