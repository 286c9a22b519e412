package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

// transports runs f once per transport against a fresh test upstream started
// with args; the spec's name is "fx".
func transports(t *testing.T, args []string, f func(t *testing.T, spec Spec)) {
	for _, tr := range []string{"stdio", "stdio-2025-11-25", "http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			var spec Spec
			switch tr {
			case "stdio":
				spec = stdioSpec("fx", args...) // go-sdk to go-sdk: protocol 2026-07-28
			case "stdio-2025-11-25":
				spec = stdioSpec("fx", append([]string{"-max-protocol", "2025-11-25"}, args...)...) // as Node servers
			default:
				srv := startServer(t, tr, "", append([]string{"-name", "fx"}, args...)...)
				spec = Spec{Name: "fx", ConnectTimeout: 10 * time.Second, CallTimeout: 10 * time.Second}
				if tr == "http" {
					spec.URL = srv.URL
				} else {
					spec.SSE = srv.URL
				}
			}
			f(t, spec)
		})
	}
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) == 0 {
		t.Fatalf("empty result %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content is %T", res.Content[0])
	}
	return tc.Text
}

func TestCallsAcrossTransports(t *testing.T) {
	t.Parallel()
	transports(t, []string{"-page-size", "3"}, func(t *testing.T, spec Spec) {
		c := start(t, New(spec, Options{}))
		waitReady(t, c.Client)
		ctx := context.Background()

		if info := c.ServerInfo(); info == nil || info.Name != "fx" {
			t.Errorf("ServerInfo = %+v, want name fx", info)
		}
		res := c.InitializeResult()
		if res == nil || res.Capabilities == nil || res.Capabilities.Tools == nil {
			t.Fatalf("InitializeResult = %+v, want tools capability", res)
		}
		switch {
		case slices.Contains(spec.Command, "-max-protocol"):
			if res.ProtocolVersion != "2025-11-25" {
				t.Errorf("protocol = %s, want 2025-11-25", res.ProtocolVersion)
			}
		case spec.Command != nil:
			if res.ProtocolVersion != "2026-07-28" {
				t.Errorf("protocol = %s, want 2026-07-28", res.ProtocolVersion)
			}
		}
		t.Logf("negotiated protocol %s", res.ProtocolVersion)

		tools, err := c.ListTools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools {
			names = append(names, tool.Name)
		}
		sort.Strings(names)
		want := []string{"add", "add_tool", "big_csv", "big_json", "big_log", "crash", "echo", "fail", "hang", "progress", "remove_tool", "report", "sleep", "whoami"}
		if !slices.Equal(names, want) {
			t.Errorf("tools (page size 3, all pages) = %v, want %v", names, want)
		}

		tests := []struct {
			name    string
			tool    string
			args    map[string]any
			want    string
			isError bool
		}{
			{"echo", "echo", map[string]any{"text": "hi"}, "hi", false},
			{"add", "add", map[string]any{"a": 2, "b": 3.5}, "5.5", false},
			{"tool isError passes through", "fail", map[string]any{"message": "boom"}, "boom", true},
			{"argument validation error is a tool error", "add", map[string]any{"a": "x"}, "", true},
		}
		for _, tc := range tests {
			res, err := c.CallTool(ctx, tc.tool, tc.args)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if res.IsError != tc.isError {
				t.Errorf("%s: isError = %v, want %v", tc.name, res.IsError, tc.isError)
			}
			if tc.want != "" && text(t, res) != tc.want {
				t.Errorf("%s: text = %q, want %q", tc.name, text(t, res), tc.want)
			}
			if tc.tool == "add" && !tc.isError {
				b, _ := json.Marshal(res.StructuredContent)
				if string(b) != `{"sum":5.5}` {
					t.Errorf("structuredContent = %s", b)
				}
			}
		}

		_, err = c.CallTool(ctx, "no_such_tool", nil)
		wantCode(t, err, codes.UpstreamError)
		if IsRetryable(err) {
			t.Error("an unknown tool must not be retryable")
		}

		resources, err := c.ListResources(ctx)
		if err != nil || len(resources) != 1 || resources[0].URI != "test://readme" {
			t.Fatalf("ListResources = %v, %v", resources, err)
		}
		templates, err := c.ListResourceTemplates(ctx)
		if err != nil || len(templates) != 0 {
			t.Errorf("ListResourceTemplates = %v, %v", templates, err)
		}
		rr, err := c.ReadResource(ctx, "test://readme")
		if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "readme resource") {
			t.Fatalf("ReadResource = %+v, %v", rr, err)
		}
		_, err = c.ReadResource(ctx, "test://missing")
		wantCode(t, err, codes.UpstreamError)

		prompts, err := c.ListPrompts(ctx)
		if err != nil || len(prompts) != 1 || prompts[0].Name != "greet" {
			t.Fatalf("ListPrompts = %v, %v", prompts, err)
		}
		pr, err := c.GetPrompt(ctx, "greet", map[string]string{"name": "Ada"})
		if err != nil || len(pr.Messages) != 1 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Ada") {
			t.Fatalf("GetPrompt = %+v, %v", pr, err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})
}

func TestTimeoutAndCancellation(t *testing.T) {
	t.Parallel()
	transports(t, nil, func(t *testing.T, spec Spec) {
		rec := filepath.Join(t.TempDir(), "calls.jsonl")
		spec.CallTimeout = time.Second
		if spec.Command != nil {
			spec.Command = append(spec.Command, "-record", rec)
		} else {
			// The HTTP servers were started by transports without -record;
			// start a dedicated one.
			tr := "http"
			if spec.SSE != "" {
				tr = "sse"
			}
			srv := startServer(t, tr, "", "-record", rec)
			spec.URL, spec.SSE = "", ""
			if tr == "http" {
				spec.URL = srv.URL
			} else {
				spec.SSE = srv.URL
			}
		}
		c := start(t, New(spec, Options{}))
		waitReady(t, c.Client)

		// Spec.CallTimeout -> UPSTREAM_TIMEOUT, and the upstream sees the cancellation.
		begin := time.Now()
		_, err := c.CallTool(context.Background(), "hang", nil)
		e := wantCode(t, err, codes.UpstreamTimeout)
		if !e.Retryable || !errors.Is(err, ErrCallTimeout) {
			t.Errorf("timeout error = %+v, want retryable wrapping ErrCallTimeout", e)
		}
		if d := time.Since(begin); d > 3*time.Second {
			t.Errorf("timeout took %v", d)
		}
		waitFor(t, "the upstream to record the cancelled hang", 5*time.Second, func() bool {
			return hasRecord(t, rec, "cancelled", "hang")
		})

		// The caller's deadline is a timeout too.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err = c.CallTool(ctx, "sleep", map[string]any{"ms": 5000})
		cancel()
		wantCode(t, err, codes.UpstreamTimeout)

		// Caller cancellation propagates upstream and is not retryable.
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err = c.CallTool(ctx, "hang", nil)
		e = wantCode(t, err, codes.UpstreamError)
		if e.Retryable || !errors.Is(err, context.Canceled) {
			t.Errorf("cancel error = %+v, want non-retryable wrapping context.Canceled", e)
		}
		waitFor(t, "the upstream to record two cancelled hangs", 5*time.Second, func() bool {
			n := 0
			for _, r := range readRecords(t, rec) {
				if r.Event == "cancelled" && r.Tool == "hang" {
					n++
				}
			}
			return n >= 2
		})

		// The session survived all of it.
		res, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "still here"})
		if err != nil || text(t, res) != "still here" {
			t.Fatalf("echo after timeouts: %v", err)
		}
		if st := c.State(); st.Connects != 1 {
			t.Errorf("Connects = %d, want 1 (no reconnect)", st.Connects)
		}
	})
}

func TestStdioCrashMidCallAndRestart(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	var toolsChanged atomic.Int32
	spec := stdioSpec("crashy", "-record", rec)
	spec.CallTimeout = 30 * time.Second // a timeout must not be what ends the hang
	c := start(t, New(spec, Options{
		OnListChanged: func(kind string) {
			if kind == KindTools {
				toolsChanged.Add(1)
			}
		},
	}))
	waitReady(t, c.Client)
	waitFor(t, "initial list-changed", 5*time.Second, func() bool { return toolsChanged.Load() >= 1 })
	pid1 := c.State().PID

	// A call in flight when the process dies returns promptly.
	hangErr := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "hang", nil)
		hangErr <- err
	}()
	waitFor(t, "hang to reach the upstream", 5*time.Second, func() bool { return hasRecord(t, rec, "call", "hang") })

	begin := time.Now()
	_, err := c.CallTool(context.Background(), "crash", nil)
	wantCode(t, err, codes.UpstreamUnavailable)
	if !IsRetryable(err) {
		t.Error("UPSTREAM_UNAVAILABLE must be retryable")
	}
	select {
	case err := <-hangErr:
		wantCode(t, err, codes.UpstreamUnavailable)
	case <-time.After(3 * time.Second):
		t.Fatal("in-flight call did not return after the process died")
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("crash detection took %v", d)
	}

	// The supervisor restarts the server; the catalog is told to refresh.
	waitFor(t, "a second connect", 10*time.Second, func() bool { return c.State().Connects >= 2 })
	waitReady(t, c.Client)
	if pid2 := c.State().PID; pid2 == pid1 || pid2 == 0 {
		t.Errorf("PID after restart = %d, before = %d", pid2, pid1)
	}
	waitFor(t, "list-changed after restart", 5*time.Second, func() bool { return toolsChanged.Load() >= 2 })
	res, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "back"})
	if err != nil || text(t, res) != "back" {
		t.Fatalf("echo after restart: %v", err)
	}
	assertReaped(t, pid1)
}

func TestExitAfterRestarts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var statuses []Status
	c := start(t, New(stdioSpec("flaky", "-exit-after", "2"), Options{
		OnState: func(s State) {
			mu.Lock()
			statuses = append(statuses, s.Status)
			mu.Unlock()
		},
	}))
	waitReady(t, c.Client)
	for i := range 2 {
		if _, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "x"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	waitFor(t, "the restart", 10*time.Second, func() bool { return c.State().Connects >= 2 })
	waitReady(t, c.Client)
	if _, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(statuses, StatusDown) {
		t.Errorf("statuses %v lack %q", statuses, StatusDown)
	}
	if statuses[0] != StatusConnecting || !slices.Contains(statuses, StatusReady) {
		t.Errorf("statuses %v", statuses)
	}
}

func TestListChanged(t *testing.T) {
	t.Parallel()
	transports(t, nil, func(t *testing.T, spec Spec) {
		events := make(chan string, 100)
		c := start(t, New(spec, Options{OnListChanged: func(kind string) { events <- kind }}))
		waitReady(t, c.Client)
		// The initial connect announces all three lists.
		got := map[string]bool{}
		for len(got) < 3 {
			select {
			case k := <-events:
				got[k] = true
			case <-time.After(5 * time.Second):
				t.Fatalf("initial list-changed events: %v", got)
			}
		}
		waitTools := func(want bool) {
			t.Helper()
			select {
			case k := <-events:
				if k != KindTools {
					t.Fatalf("event %q, want tools", k)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no tools list-changed event")
			}
			tools, err := c.ListTools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			has := slices.ContainsFunc(tools, func(tl *mcp.Tool) bool { return tl.Name == "dyn" })
			if has != want {
				t.Fatalf("tool dyn listed = %v, want %v", has, want)
			}
		}
		if _, err := c.CallTool(context.Background(), "add_tool", map[string]any{"name": "dyn"}); err != nil {
			t.Fatal(err)
		}
		waitTools(true)
		res, err := c.CallTool(context.Background(), "dyn", map[string]any{"text": "x"})
		if err != nil || text(t, res) != "dyn: x" {
			t.Fatalf("dyn: %v", err)
		}
		if _, err := c.CallTool(context.Background(), "remove_tool", map[string]any{"name": "dyn"}); err != nil {
			t.Fatal(err)
		}
		waitTools(false)
	})
}

func TestHTTPStatusMapping(t *testing.T) {
	t.Parallel()
	type call struct {
		tool string
		code string // "" = success
	}
	tests := []struct {
		name      string
		args      []string
		headers   http.Header
		connectOK bool
		connect   string // code of the connect failure, if !connectOK
		calls     []call
	}{
		{name: "401 without token", args: []string{"-fail-auth", "-token", "t0k"},
			connect: codes.AuthFailed, calls: []call{{"echo", codes.AuthFailed}}},
		{name: "401 with wrong token", args: []string{"-fail-auth", "-token", "t0k"}, headers: http.Header{"Authorization": {"Bearer nope"}},
			connect: codes.AuthFailed, calls: []call{{"echo", codes.AuthFailed}}},
		{name: "valid token", args: []string{"-fail-auth", "-token", "t0k"}, headers: http.Header{"Authorization": {"Bearer t0k"}},
			connectOK: true, calls: []call{{"echo", ""}}},
		{name: "403 at connect", args: []string{"-reject", "*=403"},
			connect: codes.PermissionDenied, calls: []call{{"echo", codes.PermissionDenied}}},
		{name: "429 at connect", args: []string{"-reject", "*=429"},
			connect: codes.RateLimited, calls: []call{{"echo", codes.RateLimited}}},
		{name: "503 at connect", args: []string{"-reject", "*=503"},
			connect: codes.UpstreamUnavailable, calls: []call{{"echo", codes.UpstreamUnavailable}}},
		{name: "per-call statuses", args: []string{"-reject", "add=429", "-reject", "fail=403", "-reject", "sleep=401", "-reject", "hang=500"},
			connectOK: true, calls: []call{{"add", codes.RateLimited}, {"echo", ""}, {"fail", codes.PermissionDenied}, {"echo", ""}, {"hang", codes.UpstreamError}, {"echo", ""}, {"sleep", codes.AuthFailed}}},
	}
	for _, tr := range []string{"http", "sse"} {
		for _, tc := range tests {
			t.Run(tr+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := startServer(t, tr, "", tc.args...)
				spec := Spec{Name: "st", Headers: tc.headers, ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second}
				if tr == "http" {
					spec.URL = srv.URL
				} else {
					spec.SSE = srv.URL
				}
				c := start(t, New(spec, Options{}))
				if tc.connectOK {
					waitReady(t, c.Client)
				} else {
					waitFor(t, "connect failure", 5*time.Second, func() bool { return c.State().Status == StatusDown })
					st := c.State()
					e := wantCode(t, st.Err, tc.connect)
					if tc.connect == codes.RateLimited && (e.RetryAfter != time.Second || !e.Retryable) {
						t.Errorf("429 error = %+v, want retryable with RetryAfter 1s", e)
					}
				}
				args := map[string]any{"text": "x", "a": 1, "b": 2, "message": "m", "ms": 1}
				for _, cl := range tc.calls {
					_, err := c.CallTool(context.Background(), cl.tool, args)
					if cl.code == "" {
						// A 401/403 answer breaks a go-sdk HTTP session (only 429
						// and 5xx do not); the supervisor reconnects.
						for i := 0; err != nil && Code(err) == codes.UpstreamUnavailable && i < 100; i++ {
							time.Sleep(50 * time.Millisecond)
							_, err = c.CallTool(context.Background(), cl.tool, args)
						}
						if err != nil {
							t.Fatalf("%s: %v", cl.tool, err)
						}
						continue
					}
					e := wantCode(t, err, cl.code)
					if want := cl.code == codes.RateLimited || cl.code == codes.UpstreamUnavailable; e.Retryable != want {
						t.Errorf("%s: retryable = %v, want %v", cl.tool, e.Retryable, want)
					}
				}
			})
		}
	}
}

func TestHeadersReachOnlyTheirUpstream(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			rec := filepath.Join(t.TempDir(), "calls.jsonl")
			srv := startServer(t, tr, "", "-record", rec)
			spec := Spec{Name: "hd", Headers: http.Header{
				"Authorization": {"Bearer upstream-secret"},
				"X-Tenant":      {"acme"},
			}}
			if tr == "http" {
				spec.URL = srv.URL
			} else {
				spec.SSE = srv.URL
			}
			c := start(t, New(spec, Options{}))
			waitReady(t, c.Client)
			res, err := c.CallTool(context.Background(), "whoami", nil)
			if err != nil {
				t.Fatal(err)
			}
			transportOwned := map[string]bool{
				"Accept": true, "Accept-Encoding": true, "Cache-Control": true, "Content-Length": true, "Content-Type": true,
				"Mcp-Protocol-Version": true, "Mcp-Session-Id": true, "Mcp-Method": true, "Mcp-Name": true,
				"User-Agent": true, "Authorization": true, "X-Tenant": true,
			}
			check := func(where string, h http.Header) {
				t.Helper()
				if got := h.Get("Authorization"); got != "Bearer upstream-secret" {
					t.Errorf("%s: Authorization = %q", where, got)
				}
				if got := h.Get("X-Tenant"); got != "acme" {
					t.Errorf("%s: X-Tenant = %q", where, got)
				}
				for k := range h {
					if !transportOwned[k] {
						t.Errorf("%s: unexpected header %q reached the upstream", where, k)
					}
				}
			}
			if tr == "http" {
				// Only the streamable HTTP server hands headers to tool handlers.
				var who struct {
					Headers http.Header `json:"headers"`
				}
				if err := json.Unmarshal([]byte(text(t, res)), &who); err != nil {
					t.Fatal(err)
				}
				check("whoami", who.Headers)
			}
			var calls, requests int
			for _, r := range readRecords(t, rec) {
				switch r.Event {
				case "call":
					calls++
				case "http":
					requests++
					check("http request", r.Headers)
				}
			}
			if calls != 1 || requests < 2 {
				t.Errorf("records: %d calls, %d HTTP requests", calls, requests)
			}
		})
	}
}

func TestHeaderTransportSameOriginOnly(t *testing.T) {
	t.Parallel()
	var seen []http.Header
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.Header.Clone())
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"7"}}, Body: http.NoBody, Request: r}, nil
	})
	tr := &headerTransport{base: base, origin: "http://up.example:8080", headers: http.Header{"Authorization": {"Bearer x"}}}
	ctx, probe := withProbe(context.Background())
	for _, u := range []string{"http://up.example:8080/mcp", "http://UP.example:8080/other", "http://evil.example/mcp", "https://up.example:8080/mcp", "http://up.example/mcp"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, http.NoBody)
		req.Header.Set("X-Original", "1")
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if req.Header.Get("Authorization") != "" {
			t.Fatal("RoundTrip modified the caller's request")
		}
	}
	want := []string{"Bearer x", "Bearer x", "", "", ""}
	for i, h := range seen {
		if got := h.Get("Authorization"); got != want[i] {
			t.Errorf("request %d: Authorization = %q, want %q", i, got, want[i])
		}
		if h.Get("X-Original") != "1" {
			t.Errorf("request %d lost its own header", i)
		}
	}
	if status, ra := probe.get(); status != 429 || ra != 7*time.Second {
		t.Errorf("probe = %d %v", status, ra)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHTTPServerLossAndRecovery(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	srv := startServer(t, "http", addr, "-name", "phoenix")
	var toolsChanged atomic.Int32
	c := start(t, New(Spec{Name: "phoenix", URL: srv.URL, HealthInterval: 200 * time.Millisecond, CallTimeout: 10 * time.Second},
		Options{OnListChanged: func(kind string) {
			if kind == KindTools {
				toolsChanged.Add(1)
			}
		}}))
	waitReady(t, c.Client)

	// Killed mid-call: the call fails promptly, classified unavailable.
	go func() {
		time.Sleep(200 * time.Millisecond)
		srv.kill()
	}()
	begin := time.Now()
	_, err := c.CallTool(context.Background(), "sleep", map[string]any{"ms": 5000})
	wantCode(t, err, codes.UpstreamUnavailable)
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("loss detection took %v", d)
	}
	waitFor(t, "down", 5*time.Second, func() bool { return c.State().Status != StatusReady })
	_, err = c.CallTool(context.Background(), "echo", map[string]any{"text": "x"})
	wantCode(t, err, codes.UpstreamUnavailable)

	// Back on the same address: the supervisor reconnects and the catalog refreshes.
	before := toolsChanged.Load()
	startServer(t, "http", addr, "-name", "phoenix")
	waitFor(t, "reconnect", 15*time.Second, func() bool { return c.State().Status == StatusReady })
	res, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "again"})
	if err != nil || text(t, res) != "again" {
		t.Fatalf("after recovery: %v", err)
	}
	waitFor(t, "list-changed after reconnect", 5*time.Second, func() bool { return toolsChanged.Load() > before })
}

func TestHealthPingDetectsIdleLoss(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "http", "")
	c := start(t, New(Spec{Name: "idle", URL: srv.URL, HealthInterval: 100 * time.Millisecond}, Options{}))
	waitReady(t, c.Client)
	srv.kill()
	waitFor(t, "the health ping to notice", 5*time.Second, func() bool { return c.State().Status != StatusReady })
	_, err := c.ListTools(context.Background())
	wantCode(t, err, codes.UpstreamUnavailable)
}

func TestProgressAndStderr(t *testing.T) {
	t.Parallel()
	var sink logSink
	var mu sync.Mutex
	var progress []float64
	var logs []any
	c := start(t, New(stdioSpec("prog"), Options{
		Logger: sink.logger(),
		OnProgress: func(p *mcp.ProgressNotificationParams) {
			mu.Lock()
			progress = append(progress, p.Progress)
			mu.Unlock()
		},
		//lint:ignore SA1019 upstream log forwarding is still part of the 2025-11-25 protocol.
		OnLog: func(p *mcp.LoggingMessageParams) {
			mu.Lock()
			logs = append(logs, p.Data)
			mu.Unlock()
		},
	}))
	waitReady(t, c.Client)
	// The per-request log level of protocol 2026-07-28.
	//lint:ignore SA1019 see OnLog above.
	meta := mcp.Meta{"progressToken": "tok-1", mcp.MetaKeyLogLevel: "info"}
	res, err := c.CallToolParams(context.Background(), &mcp.CallToolParams{
		Name: "progress", Arguments: map[string]any{"steps": 3}, Meta: meta,
	})
	if err != nil || text(t, res) != "done 3 steps" {
		t.Fatalf("progress: %v", err)
	}
	if len(meta) != 2 {
		t.Errorf("CallToolParams modified the caller's _meta: %v", meta)
	}
	waitFor(t, "3 progress notifications and a log message", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 3 && len(logs) == 1 && logs[0] == "progress done after 3 steps"
	})
	// The child's stderr is logged line by line, tagged with the upstream.
	waitFor(t, "the child's stderr in the log", 5*time.Second, func() bool {
		return sink.contains("upstream stderr upstream=prog stream=stderr line=") && sink.contains("upstream test server ready")
	})
}

func TestLifecycleErrors(t *testing.T) {
	t.Parallel()
	bad := New(Spec{Name: "bad"}, Options{})
	err := bad.Run(context.Background())
	if !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Run(invalid) = %v", err)
	}
	_, err = bad.CallTool(context.Background(), "x", nil)
	wantCode(t, err, codes.UpstreamError)

	c := New(stdioSpec("life"), Options{})
	r := start(t, c)
	waitReady(t, c)
	if err := c.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := c.State(); st.Status != StatusClosed {
		t.Errorf("status after Close = %s", st.Status)
	}
	_, err = c.CallTool(context.Background(), "echo", nil)
	wantCode(t, err, codes.UpstreamUnavailable)
	if !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}
	if err := c.WaitReady(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitReady after Close = %v", err)
	}

	// A command that does not exist: down with UPSTREAM_UNAVAILABLE, calls fail fast.
	missing := start(t, New(Spec{Name: "missing", Command: []string{filepath.Join(t.TempDir(), "nope")}}, Options{}))
	waitFor(t, "down", 5*time.Second, func() bool { return missing.State().Status == StatusDown })
	wantCode(t, missing.State().Err, codes.UpstreamUnavailable)
	begin := time.Now()
	_, err = missing.CallTool(context.Background(), "echo", nil)
	wantCode(t, err, codes.UpstreamUnavailable)
	if !errors.Is(err, ErrNotConnected) || time.Since(begin) > time.Second {
		t.Errorf("call while down = %v after %v", err, time.Since(begin))
	}

	// A server that never answers the handshake: connect timeout.
	mute := start(t, New(Spec{Name: "mute", Command: []string{"sleep", "30"}, ConnectTimeout: 200 * time.Millisecond, TerminateGrace: 100 * time.Millisecond}, Options{}))
	waitFor(t, "connect timeout", 5*time.Second, func() bool { return mute.State().Status == StatusDown })
	if e := wantCode(t, mute.State().Err, codes.UpstreamTimeout); !errors.Is(e, ErrConnectTimeout) {
		t.Errorf("connect timeout error = %v", e)
	}
}

// assertReaped fails unless pid is gone (neither running nor a zombie).
func assertReaped(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("no pid")
	}
	// kill(pid, 0) succeeds for a zombie too, so ESRCH means reaped.
	waitFor(t, "the child to be reaped", 5*time.Second, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}
