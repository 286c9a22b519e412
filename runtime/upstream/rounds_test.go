package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type askArgs struct {
	Rounds int  `json:"rounds,omitempty"`
	Shed   bool `json:"shed,omitempty"`
}

// mrtrServer is a go-sdk server at protocol 2026-07-28 (stateless HTTP)
// whose tool ask needs Rounds answers, one elicitation per round, carried
// in its request state; with Shed it only ever sheds load.
func mrtrServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "mrtr", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, a askArgs) (*mcp.CallToolResult, any, error) {
		if a.Shed {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}}, nil, nil
		}
		got := req.Params.RequestState
		for _, r := range req.Params.InputResponses {
			if er, ok := r.(*mcp.ElicitResult); ok {
				got += er.Content["answer"].(string) + ";"
			}
		}
		if strings.Count(got, ";") >= a.Rounds {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil, nil
		}
		q := "q" + strconv.Itoa(strings.Count(got, ";"))
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{q: &mcp.ElicitParams{Message: q,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}},
			RequestState: got}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestInputRounds(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	c := start(t, New(Spec{Name: "mrtr", URL: mrtrServer(t), ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second}, Options{
		Elicitation: &mcp.ElicitationCapabilities{},
		OnElicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "a-" + req.Params.Message}}, nil
		}}))
	waitReady(t, c.Client)
	ctx := context.Background()

	// The client answers every round through its handler.
	res, err := c.CallTool(ctx, "ask", map[string]any{"rounds": 3})
	if err != nil || text(t, res) != "a-q0;a-q1;a-q2;" || asked.Load() != 3 {
		t.Fatalf("answered rounds: %v %+v %q (asked %d)", err, res, text(t, res), asked.Load())
	}

	// Relayed: the input_required result comes back as it is, and the
	// caller's retry with the answers completes the call.
	relay := RelayInput(ctx)
	res, err = c.CallTool(relay, "ask", map[string]any{"rounds": 1})
	if err != nil || !res.NeedsInput() || res.InputRequests["q0"] == nil {
		t.Fatalf("relayed: %v %+v", err, res)
	}
	res, err = c.CallToolParams(relay, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"rounds": 1},
		InputResponses: mcp.InputResponseMap{"q0": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "mine"}}},
		RequestState:   res.RequestState})
	if err != nil || text(t, res) != "mine;" {
		t.Fatalf("relayed retry: %v %+v", err, res)
	}

	// Bounded: an upstream that keeps asking, or keeps shedding load.
	if _, err := c.CallTool(ctx, "ask", map[string]any{"rounds": MaxInputRounds + 5}); !errors.Is(err, ErrInputRounds) {
		t.Fatalf("endless rounds: %v", err)
	}
	if _, err := c.CallTool(ctx, "ask", map[string]any{"shed": true}); !errors.Is(err, ErrInputRounds) {
		t.Fatalf("endless shedding: %v", err)
	}
}

// Without a handler for the kind of input asked for, the call fails with
// the reason instead of hanging or answering for the client.
func TestInputRoundsWithoutHandler(t *testing.T) {
	t.Parallel()
	c := start(t, New(Spec{Name: "mrtr", URL: mrtrServer(t), ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second}, Options{}))
	waitReady(t, c.Client)
	_, err := c.CallTool(context.Background(), "ask", map[string]any{"rounds": 1})
	if err == nil || !strings.Contains(err.Error(), "elicitation is not supported") {
		t.Fatalf("no handler: %v", err)
	}
}
