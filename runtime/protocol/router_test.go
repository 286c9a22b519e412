package protocol

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Text string `json:"text"`
}

func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	return s
}

// One endpoint serves a client at the sessionless revision without a
// session, and a client at 2025-11-25 with one.
func TestRouterBothRevisions(t *testing.T) {
	srv := httptest.NewServer(NewRouter(newEchoServer(), RouterOptions{}))
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		version     string
		wantSession bool
	}{{"", false}, {Sessionless, false}, {"2025-11-25", true}, {"2025-06-18", true}} {
		client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
		if err != nil {
			t.Fatalf("%q: %v", tc.version, err)
		}
		got := cs.InitializeResult().ProtocolVersion
		if want := tc.version; want != "" && got != want {
			t.Errorf("asked %q, negotiated %q", want, got)
		}
		if tc.version == "" && got < Sessionless {
			t.Errorf("a default client negotiated %q", got)
		}
		if (cs.ID() != "") != tc.wantSession {
			t.Errorf("%q: session id %q", tc.version, cs.ID())
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
			t.Fatalf("%q: call %v %+v", tc.version, err, res)
		}
		cs.Close()
	}
}

func post(t *testing.T, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The routing decisions: a sessionless _meta without the header reaches
// the stateless handler, which answers the spec's header error; a body
// over the limit is refused whole; an old initialize keeps working.
func TestRouterRouting(t *testing.T) {
	srv := httptest.NewServer(NewRouter(newEchoServer(), RouterOptions{MaxRequestBodyBytes: 4096}))
	defer srv.Close()
	meta := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	if code, body := post(t, srv.URL, meta, nil); code != http.StatusBadRequest || !strings.Contains(body, "-32020") {
		t.Errorf("sessionless _meta without the header: %d %s", code, body)
	}
	if code, body := post(t, srv.URL, meta, map[string]string{"Mcp-Protocol-Version": Sessionless, "Mcp-Method": "tools/list"}); code != http.StatusOK || !strings.Contains(body, `"echo"`) {
		t.Errorf("sessionless with the header: %d %s", code, body)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	if code, _ := post(t, srv.URL, big, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", code)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	if code, body := post(t, srv.URL, init, nil); code != http.StatusOK || !strings.Contains(body, `"2025-11-25"`) {
		t.Errorf("initialize: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Mcp-Protocol-Version", Sessionless)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET at the sessionless revision: %d", resp.StatusCode)
	}
}

func TestMetaVersion(t *testing.T) {
	for body, want := range map[string]string{
		`{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`: "2026-07-28",
		`{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`:            "",
		`[{"params":{}}]`: "",
		`not json`:        "",
		`{"params":null}`: "",
	} {
		if got := MetaVersion([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

func FuzzMetaVersion(f *testing.F) {
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	f.Add([]byte(`{"params":{"_meta":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = MetaVersion(body)
	})
}

// At the sessionless revision a feature the server does not declare is
// not served; an older client keeps the go-sdk's answers.
func TestDeclaredOnly(t *testing.T) {
	s := newEchoServer()
	s.AddReceivingMiddleware(DeclaredOnly(func() *mcp.ServerCapabilities { return &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}} }))
	srv := httptest.NewServer(NewRouter(s, RouterOptions{}))
	defer srv.Close()
	ctx := context.Background()
	for _, v := range []string{Sessionless, "2025-11-25"} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.ListPrompts(ctx, nil)
		if (err != nil) != (v == Sessionless) {
			t.Errorf("%s: prompts/list: %v", v, err)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("%s: tools/list: %v", v, err)
		}
		cs.Close()
	}
}
