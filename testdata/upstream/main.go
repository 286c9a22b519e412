// Command upstream is a small, configurable MCP server built with the go-sdk.
// quiver's unit and end-to-end tests run it as an upstream server, over stdio,
// streamable HTTP or legacy SSE.
//
// Usage:
//
//	go build -o /tmp/upstream ./testdata/upstream
//	/tmp/upstream -transport stdio -name fixtures -record /tmp/calls.jsonl
//	/tmp/upstream -transport http -addr 127.0.0.1:0 -token s3cret -fail-auth
//
// With -transport http (or sse) the first line written to stdout is the URL
// of the MCP endpoint, for example "http://127.0.0.1:40123/mcp" (or
// ".../sse"); nothing else is ever written to stdout in those modes. Logs go
// to stderr.
//
// Tools: echo, add, fail, sleep, hang, crash, big_log, big_json, big_csv,
// add_tool, remove_tool, whoami, progress. Resource: test://readme.
// Prompt: greet.
//
// With -mrtr-tools it also has elicit_wait and roots (see addRoundTripTools).
//
// With -extras the server also has the tools sample, elicit, ask, consult,
// log and touch,
// the resource template test://items/{id}, completions (for the greet
// prompt's name argument and the item template's id argument) and resource
// subscriptions for any URI, and so advertises the completions capability and
// resources.subscribe. They are opt-in so that the default tool, template and
// capability lists stay as they were.
//
// sample and elicit send sampling/createMessage and elicitation/create
// requests to the client from inside the tool call; the go-sdk refuses such
// server-initiated requests on sessions negotiated at protocol 2026-07-28 or
// newer (SEP-2322), so they return an isError result there. Use
// -max-protocol 2025-11-25 to exercise them. log (like progress) sends
// notifications/message only once the client has enabled logging at or
// below the message's level (logging/setLevel on older protocols).
//
// With -record FILE every tools/call that reaches the server appends one JSON
// line {"time","pid","server","event":"call","tool","args","headers"} to FILE
// (headers only over streamable HTTP: the go-sdk's SSE server does not pass
// them to handlers); sleep and hang append {"event":"cancelled","tool"} when
// their call is cancelled; resources/subscribe and resources/unsubscribe
// append {"event":"subscribe"|"unsubscribe","uri"} and touch appends
// {"event":"touch","uri","subscribers"}; over HTTP and SSE every HTTP request
// appends {"event":"http","method","path","headers"} before any -fail-auth or
// -reject check. The file is opened with O_APPEND, so several server processes
// (restarts) may share one file.
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// config holds the parsed command line.
type config struct {
	transport  string
	addr       string
	name       string
	version    string
	record     string
	failAuth   bool
	token      string
	exitAfter  int
	pageSize   int
	rejects    rejectFlag
	statelessH bool
	linger     bool
	ignoreTerm bool
	maxProto   string
	extras     bool
	drift      bool
	askPrims   bool
	openEcho   bool
	mrtrTools  bool
	tasks      bool
}

// rejectFlag is a repeatable -reject TOOL=STATUS flag.
type rejectFlag map[string]int

// String implements flag.Value.
func (r rejectFlag) String() string {
	parts := make([]string, 0, len(r))
	for k, v := range r {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (r rejectFlag) Set(s string) error {
	tool, status, ok := strings.Cut(s, "=")
	if !ok || tool == "" {
		return fmt.Errorf("want TOOL=STATUS, got %q", s)
	}
	code, err := strconv.Atoi(status)
	if err != nil || code < 400 || code > 599 {
		return fmt.Errorf("bad HTTP status in %q", s)
	}
	r[tool] = code
	return nil
}

func main() {
	cfg := config{rejects: rejectFlag{}}
	flag.StringVar(&cfg.transport, "transport", "stdio", "stdio | http (streamable HTTP) | sse (legacy SSE)")
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "listen address for http and sse")
	flag.StringVar(&cfg.name, "name", "testupstream", "server name reported in the initialize result")
	flag.StringVar(&cfg.version, "version", "1.0.0", "server version reported in the initialize result")
	flag.StringVar(&cfg.record, "record", "", "append one JSON line per tools/call to this file")
	flag.BoolVar(&cfg.failAuth, "fail-auth", false, "http/sse: answer 401 unless the request carries Authorization: Bearer <-token>")
	flag.StringVar(&cfg.token, "token", "", "bearer token accepted with -fail-auth")
	flag.IntVar(&cfg.exitAfter, "exit-after", 0, "exit (status 0) about 100 ms after answering this many tools/call requests; 0 = never")
	flag.IntVar(&cfg.pageSize, "page-size", 0, "page size for list methods (0 = go-sdk default)")
	flag.Var(cfg.rejects, "reject", "http/sse: answer tools/call of TOOL with HTTP STATUS (TOOL=STATUS, repeatable; TOOL '*' rejects every POST, including initialize)")
	flag.BoolVar(&cfg.statelessH, "stateless", false, "http: run the streamable handler in stateless mode")
	flag.BoolVar(&cfg.linger, "linger", false, "stdio: keep running after stdin is closed, until SIGTERM (as Node servers do)")
	flag.BoolVar(&cfg.ignoreTerm, "ignore-sigterm", false, "ignore SIGTERM too, so only SIGKILL ends the process")
	flag.StringVar(&cfg.maxProto, "max-protocol", "", "newest MCP protocol version to offer, e.g. 2025-11-25 to behave like the Node servers (default: all the go-sdk supports)")
	flag.BoolVar(&cfg.openEcho, "open-echo", false, "give echo a schema that does not forbid undeclared arguments (no additionalProperties), as many servers do")
	flag.BoolVar(&cfg.askPrims, "ask-primitives", false, "add the prompt interview and the resource test://secret, which ask for input the multi-round-trip way")
	flag.BoolVar(&cfg.drift, "drift", false, "change the tool list as a server upgrade would: fail removed, echo with one more input property, and a destructive tool wipe added")
	flag.BoolVar(&cfg.mrtrTools, "mrtr-tools", false, "add the tools elicit_wait (elicitation, then a sleep; records its events) and roots (roots the multi-round-trip way)")
	flag.BoolVar(&cfg.extras, "extras", false, "add the tools sample, elicit, log and touch, the resource template test://items/{id}, completions and resource subscriptions")
	flag.BoolVar(&cfg.tasks, "tasks", false, "declare the tasks extension and add the tools report, brief, ask_task and forever, answered with tasks when the request declares it (see tasks.go)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if cfg.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
		sigs = sigs[:1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	if err := run(ctx, cfg, logger, os.Stdout); err != nil {
		logger.Error("upstream test server failed", "err", err)
		os.Exit(1)
	}
}

// app is the state of one server process.
type app struct {
	cfg    config
	logger *slog.Logger
	server *mcp.Server

	recMu sync.Mutex
	rec   *os.File // nil without -record

	calls atomic.Int64

	subMu sync.Mutex
	subs  map[string]map[*mcp.ServerSession]bool // URI -> subscribed sessions

	tasks *taskStore // -tasks only
}

func run(ctx context.Context, cfg config, logger *slog.Logger, stdout io.Writer) error {
	a := &app{cfg: cfg, logger: logger, subs: map[string]map[*mcp.ServerSession]bool{}}
	if cfg.record != "" {
		f, err := os.OpenFile(cfg.record, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("open record file: %w", err)
		}
		defer f.Close()
		a.rec = f
	}
	var versions []string
	if cfg.maxProto != "" {
		for _, v := range mcp.SupportedProtocolVersions() {
			if v <= cfg.maxProto {
				versions = append(versions, v)
			}
		}
		if len(versions) == 0 {
			return fmt.Errorf("-max-protocol %q: no supported version", cfg.maxProto)
		}
	}
	opts := &mcp.ServerOptions{
		Instructions:              "quiver test upstream",
		Logger:                    logger,
		PageSize:                  cfg.pageSize,
		SupportedProtocolVersions: versions,
	}
	if cfg.extras {
		// The go-sdk infers the completions capability and resources.subscribe
		// from these handlers; logging is in its default capabilities.
		opts.CompletionHandler = complete
		opts.SubscribeHandler = a.subscribe
		opts.UnsubscribeHandler = a.unsubscribe
	}
	if cfg.tasks {
		//lint:ignore SA1019 the go-sdk's default capabilities, kept beside the extension.
		opts.Capabilities = &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Extensions: map[string]any{tasksExt: map[string]any{}}}
	}
	a.server = mcp.NewServer(&mcp.Implementation{Name: cfg.name, Version: cfg.version}, opts)
	a.server.AddReceivingMiddleware(a.recordMiddleware)
	a.addTools()
	if a.cfg.drift {
		a.addDrift()
	}
	a.addResourcesAndPrompts()
	if cfg.askPrims {
		a.addAskPrimitives()
	}
	if cfg.extras {
		a.addExtras()
	}
	if cfg.mrtrTools {
		a.addRoundTripTools()
	}
	if cfg.tasks {
		a.addTasks()
	}

	switch cfg.transport {
	case "stdio":
		logger.Info("upstream test server ready", "name", cfg.name, "transport", "stdio", "pid", os.Getpid())
		err := a.server.Run(ctx, &mcp.StdioTransport{})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("serve stdio: %w", err)
		}
		if cfg.linger {
			logger.Info("stdin closed; lingering until terminated")
			<-ctx.Done()
		}
		return nil
	case "http", "sse":
		return a.serveHTTP(ctx, stdout)
	default:
		return fmt.Errorf("unknown -transport %q", cfg.transport)
	}
}

func (a *app) serveHTTP(ctx context.Context, stdout io.Writer) error {
	ln, err := net.Listen("tcp", a.cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	getServer := func(*http.Request) *mcp.Server { return a.server }
	mux := http.NewServeMux()
	path := "/mcp"
	if a.cfg.transport == "sse" {
		path = "/sse"
		mux.Handle(path, mcp.NewSSEHandler(getServer, nil))
	} else {
		mux.Handle(path, mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless: a.cfg.statelessH,
			Logger:    a.logger,
		}))
	}
	srv := &http.Server{Handler: a.httpGuard(mux), ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + path
	if _, err := fmt.Fprintln(stdout, url); err != nil {
		return fmt.Errorf("print url: %w", err)
	}
	a.logger.Info("upstream test server ready", "name", a.cfg.name, "transport", a.cfg.transport, "url", url, "pid", os.Getpid())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// httpGuard implements -fail-auth and -reject in front of the MCP handler.
func (a *app) httpGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.record(map[string]any{"event": "http", "method": r.Method, "path": r.URL.Path, "headers": r.Header})
		if a.cfg.failAuth && (a.cfg.token == "" || r.Header.Get("Authorization") != "Bearer "+a.cfg.token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="upstream"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if len(a.cfg.rejects) > 0 && r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			if err != nil {
				http.Error(w, "read body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if status, ok := a.rejectStatus(body); ok {
				if status == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", "1")
				}
				http.Error(w, http.StatusText(status), status)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (a *app) rejectStatus(body []byte) (int, bool) {
	if status, ok := a.cfg.rejects["*"]; ok {
		return status, true
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" {
		return 0, false
	}
	status, ok := a.cfg.rejects[msg.Params.Name]
	return status, ok
}

// recordMiddleware records every tools/call and implements -exit-after.
func (a *app) recordMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		var name string
		var args json.RawMessage
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			name, args = p.Name, p.Arguments
		}
		var headers http.Header
		if extra := req.GetExtra(); extra != nil {
			headers = extra.Header
		}
		a.record(map[string]any{"event": "call", "tool": name, "args": args, "headers": headers})
		res, err := next(ctx, method, req)
		if n := a.calls.Add(1); a.cfg.exitAfter > 0 && n == int64(a.cfg.exitAfter) {
			a.logger.Info("exit-after reached", "calls", n)
			time.AfterFunc(100*time.Millisecond, func() { os.Exit(0) })
		}
		return res, err
	}
}

// record appends one JSON line to the record file.
func (a *app) record(fields map[string]any) {
	if a.rec == nil {
		return
	}
	fields["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	fields["pid"] = os.Getpid()
	fields["server"] = a.cfg.name
	line, err := json.Marshal(fields)
	if err != nil {
		a.logger.Error("record", "err", err)
		return
	}
	a.recMu.Lock()
	defer a.recMu.Unlock()
	if _, err := a.rec.Write(append(line, '\n')); err != nil {
		a.logger.Error("record", "err", err)
	}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// addDrift changes the tools as an upgrade of the server would (-drift).
func (a *app) addDrift() {
	a.server.RemoveTools("fail")
	mcp.AddTool(a.server, &mcp.Tool{Name: "echo", Description: "Echo the given text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoDriftIn) (*mcp.CallToolResult, any, error) {
			return textResult(in.Prefix + in.Text), nil, nil
		})
	destructive := true
	mcp.AddTool(a.server, &mcp.Tool{Name: "wipe", Description: "Delete every record (destructive; it only says so).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return textResult("wiped"), nil, nil
		})
}

type echoDriftIn struct {
	Text   string `json:"text" jsonschema:"the text to echo back"`
	Prefix string `json:"prefix,omitempty" jsonschema:"prepended to the text"`
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type addIn struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

type addOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

type reportIn struct {
	Lines int  `json:"lines" jsonschema:"number of log lines"`
	Full  bool `json:"full,omitempty" jsonschema:"also return the log text as structured content"`
}

// reportOut is report's output schema: like server-filesystem's
// read_text_file, the structured content may repeat the text.
type reportOut struct {
	Lines int    `json:"lines" jsonschema:"number of log lines"`
	Text  string `json:"text,omitempty" jsonschema:"the log text (when full)"`
}

type failIn struct {
	Message string `json:"message" jsonschema:"the error message of the failed result"`
}

type sleepIn struct {
	MS int `json:"ms" jsonschema:"milliseconds to sleep"`
}

type emptyIn struct{}

type linesIn struct {
	Lines int `json:"lines" jsonschema:"number of log lines"`
}

type itemsIn struct {
	Items int `json:"items" jsonschema:"number of items"`
}

type rowsIn struct {
	Rows int `json:"rows" jsonschema:"number of CSV data rows"`
}

type nameIn struct {
	Name string `json:"name" jsonschema:"tool name"`
}

type stepsIn struct {
	Steps int `json:"steps" jsonschema:"number of progress steps"`
}

type sampleIn struct {
	Prompt string `json:"prompt" jsonschema:"the user message to send to the client's model"`
}

type elicitIn struct {
	Question string `json:"question" jsonschema:"the message shown to the user"`
}

type elicitWaitIn struct {
	Question string `json:"question" jsonschema:"the message shown to the user"`
	MS       int    `json:"ms,omitempty" jsonschema:"milliseconds to sleep after the answer, honouring cancellation"`
}

type logIn struct {
	Level   string `json:"level,omitempty" jsonschema:"log level (debug, info, notice, warning, error, critical, alert, emergency); default info"`
	Message string `json:"message,omitempty" jsonschema:"the log message"`
}

type uriIn struct {
	URI string `json:"uri" jsonschema:"the resource URI"`
}

const maxBig = 1_000_000

func (a *app) addTools() {
	s := a.server
	echo := &mcp.Tool{Name: "echo", Description: "Echo the given text back."}
	if a.cfg.openEcho {
		echo.InputSchema = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}
	}
	mcp.AddTool(s, echo,
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return textResult(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers; the sum is also returned as structured content.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			sum := in.A + in.B
			return textResult(strconv.FormatFloat(sum, 'f', -1, 64)), addOut{Sum: sum}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Return a tool result with isError set."},
		func(_ context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			res := textResult(in.Message)
			res.IsError = true
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds, honouring cancellation."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return textResult(fmt.Sprintf("slept %d ms", in.MS)), nil, nil
			case <-ctx.Done():
				a.record(map[string]any{"event": "cancelled", "tool": "sleep"})
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Block until the call is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ emptyIn) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			a.record(map[string]any{"event": "cancelled", "tool": "hang"})
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server process (status 3) in the middle of the call."},
		func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
			a.logger.Warn("crash requested: exiting with status 3")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big_log", Description: "Return a large, realistic application log as text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in linesIn) (*mcp.CallToolResult, any, error) {
			return textResult(bigLog(clamp(in.Lines))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "report", Description: "Return a log as text; a tool with an outputSchema whose structured content is small, or (full) repeats the text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in reportIn) (*mcp.CallToolResult, reportOut, error) {
			text := bigLog(clamp(in.Lines))
			out := reportOut{Lines: clamp(in.Lines)}
			if in.Full {
				out.Text = text
			}
			return textResult(text), out, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big_json", Description: "Return a large JSON object as text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in itemsIn) (*mcp.CallToolResult, any, error) {
			text, err := bigJSON(clamp(in.Items))
			if err != nil {
				return nil, nil, err
			}
			return textResult(text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big_csv", Description: "Return CSV text with a header row.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in rowsIn) (*mcp.CallToolResult, any, error) {
			text, err := bigCSV(clamp(in.Rows))
			if err != nil {
				return nil, nil, err
			}
			return textResult(text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Register a new tool at run time (the server then sends notifications/tools/list_changed)."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			if in.Name == "" {
				return nil, nil, errors.New("name is required")
			}
			name := in.Name
			mcp.AddTool(s, &mcp.Tool{Name: name, Description: "A tool added at run time by add_tool."},
				func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
					return textResult(name + ": " + in.Text), nil, nil
				})
			return textResult("added " + name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "remove_tool", Description: "Remove a tool at run time."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			s.RemoveTools(in.Name)
			return textResult("removed " + in.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Return the HTTP request headers this call arrived with, as JSON (empty over stdio and SSE)."},
		func(_ context.Context, req *mcp.CallToolRequest, _ emptyIn) (*mcp.CallToolResult, any, error) {
			headers := http.Header{}
			if req.Extra != nil && req.Extra.Header != nil {
				headers = req.Extra.Header
			}
			b, err := json.Marshal(map[string]any{"server": a.cfg.name, "headers": headers})
			if err != nil {
				return nil, nil, err
			}
			return textResult(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Send progress notifications (when the call has a progress token) and a log message."},
		func(ctx context.Context, req *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			steps := min(max(in.Steps, 0), 1000)
			for i := 1; i <= steps; i++ {
				if token != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: float64(i), Total: float64(steps),
						Message: fmt.Sprintf("step %d of %d", i, steps),
					}); err != nil {
						return nil, nil, err
					}
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
			//lint:ignore SA1019 logging is deprecated in 2026-07-28 but still the only way to test log forwarding.
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: a.cfg.name, Data: fmt.Sprintf("progress done after %d steps", steps)})
			return textResult(fmt.Sprintf("done %d steps", steps)), nil, nil
		})
}

// addRoundTripTools adds what -mrtr-tools enables: elicit_wait and roots.
func (a *app) addRoundTripTools() {
	s := a.server
	mcp.AddTool(s, &mcp.Tool{Name: "elicit_wait", Description: "Ask the client's user a question (elicitation/create), then sleep ms milliseconds; records elicited, elicit-failed and cancelled events."},
		func(ctx context.Context, req *mcp.CallToolRequest, in elicitWaitIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Question, RequestedSchema: json.RawMessage(
				`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)})
			if err != nil {
				a.record(map[string]any{"event": "elicit-failed", "tool": "elicit_wait", "error": err.Error()})
				return errorResult(err.Error()), nil, nil
			}
			a.record(map[string]any{"event": "elicited", "tool": "elicit_wait", "action": res.Action})
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				a.record(map[string]any{"event": "cancelled", "tool": "elicit_wait"})
				return nil, nil, ctx.Err()
			}
			content, err := json.Marshal(res.Content)
			if err != nil {
				return errorResult(err.Error()), nil, nil
			}
			return textResult(fmt.Sprintf("elicited: %s %s", res.Action, content)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "Ask the client for its roots the multi-round-trip way (protocol 2026-07-28: an input-required result; the go-sdk turns it into roots/list for older clients) and return their URIs."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ emptyIn) (*mcp.CallToolResult, any, error) {
			//lint:ignore SA1019 roots are deprecated in 2026-07-28 but still what this tool tests.
			if res, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult); ok && res != nil {
				uris := make([]string, 0, len(res.Roots))
				for _, r := range res.Roots {
					uris = append(uris, r.URI)
				}
				return textResult("roots: " + strings.Join(uris, " ")), nil, nil
			}
			//lint:ignore SA1019 see above.
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
		})
}

// addExtras adds what -extras enables: the tools sample, elicit, ask, consult, log
// and touch, and the resource template test://items/{id}.
func (a *app) addExtras() {
	s := a.server
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Ask the client to sample its model (sampling/createMessage) and return the answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
			//lint:ignore SA1019 sampling is deprecated in 2026-07-28 but still what this tool tests.
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				//lint:ignore SA1019 see above.
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
				MaxTokens: 64,
			})
			if err != nil {
				return errorResult(err.Error()), nil, nil
			}
			var text string
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
			return textResult(fmt.Sprintf("sampled: %s %s", res.Model, text)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Ask the client's user a question (elicitation/create) and return the answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: in.Question,
				RequestedSchema: json.RawMessage(
					`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`),
			})
			if err != nil {
				return errorResult(err.Error()), nil, nil
			}
			content, err := json.Marshal(res.Content)
			if err != nil {
				return errorResult(err.Error()), nil, nil
			}
			return textResult(fmt.Sprintf("elicited: %s %s", res.Action, content)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Ask the client's user a question the multi-round-trip way (protocol 2026-07-28: an input-required result; the go-sdk turns it into elicitation/create for older clients)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
			if res, ok := req.Params.InputResponses["answer"].(*mcp.ElicitResult); ok && res != nil {
				content, err := json.Marshal(res.Content)
				if err != nil {
					return errorResult(err.Error()), nil, nil
				}
				return textResult(fmt.Sprintf("asked: %s %s", res.Action, content)), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"answer": &mcp.ElicitParams{Message: in.Question, RequestedSchema: json.RawMessage(
					`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "consult", Description: "Ask the client to sample its model the multi-round-trip way (protocol 2026-07-28: an input-required result; the go-sdk turns it into sampling/createMessage for older clients)."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
			// Over the wire a sampling answer decodes as the with-tools
			// form; in process it may be either.
			switch res := req.Params.InputResponses["model"].(type) {
			//lint:ignore SA1019 sampling is deprecated in 2026-07-28 but still what this tool tests.
			case *mcp.CreateMessageWithToolsResult:
				var text string
				for _, c := range res.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						text += tc.Text
					}
				}
				return textResult(fmt.Sprintf("consulted: %s %s", res.Model, text)), nil, nil
			//lint:ignore SA1019 sampling is deprecated in 2026-07-28 but still what this tool tests.
			case *mcp.CreateMessageResult:
				var text string
				if tc, ok := res.Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
				return textResult(fmt.Sprintf("consulted: %s %s", res.Model, text)), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				//lint:ignore SA1019 sampling is deprecated in 2026-07-28 but still what this tool tests.
				"model": &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}, MaxTokens: 64},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Send one notifications/message at the given level."},
		func(ctx context.Context, req *mcp.CallToolRequest, in logIn) (*mcp.CallToolResult, any, error) {
			level := in.Level
			if level == "" {
				level = "info"
			}
			//lint:ignore SA1019 logging is deprecated in 2026-07-28 but still the only way to test log forwarding.
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Logger: "testupstream", Data: in.Message}); err != nil {
				return errorResult(err.Error()), nil, nil
			}
			return textResult("logged"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Send notifications/resources/updated for a URI to the sessions subscribed to it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in uriIn) (*mcp.CallToolResult, any, error) {
			if in.URI == "" {
				return errorResult("uri is required"), nil, nil
			}
			n := a.subscribers(in.URI)
			a.record(map[string]any{"event": "touch", "uri": in.URI, "subscribers": n})
			a.logger.Info("touch", "uri", in.URI, "subscribers", n)
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
				return errorResult(err.Error()), nil, nil
			}
			return textResult("touched"), nil, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: itemsTemplate, Name: "item", Description: "An item by id.", MIMEType: "text/plain",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		id, ok := strings.CutPrefix(req.Params.URI, "test://items/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + id,
		}}}, nil
	})
}

func errorResult(text string) *mcp.CallToolResult {
	res := textResult(text)
	res.IsError = true
	return res
}

// subscribe implements ServerOptions.SubscribeHandler: any URI is accepted.
func (a *app) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	a.subMu.Lock()
	if a.subs[req.Params.URI] == nil {
		a.subs[req.Params.URI] = map[*mcp.ServerSession]bool{}
	}
	a.subs[req.Params.URI][req.Session] = true
	a.subMu.Unlock()
	a.record(map[string]any{"event": "subscribe", "uri": req.Params.URI})
	return nil
}

// unsubscribe implements ServerOptions.UnsubscribeHandler.
func (a *app) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	a.subMu.Lock()
	delete(a.subs[req.Params.URI], req.Session)
	if len(a.subs[req.Params.URI]) == 0 {
		delete(a.subs, req.Params.URI)
	}
	a.subMu.Unlock()
	a.record(map[string]any{"event": "unsubscribe", "uri": req.Params.URI})
	return nil
}

// subscribers returns how many sessions have subscribed to uri.
func (a *app) subscribers(uri string) int {
	a.subMu.Lock()
	defer a.subMu.Unlock()
	return len(a.subs[uri])
}

const itemsTemplate = "test://items/{id}"

// complete implements ServerOptions.CompletionHandler.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var candidates []string
	ref, arg := req.Params.Ref, req.Params.Argument
	switch {
	case ref.Type == "ref/prompt" && ref.Name == "greet" && arg.Name == "name":
		candidates = []string{"alice", "bob", "carol"}
	case ref.Type == "ref/resource" && ref.URI == itemsTemplate && arg.Name == "id":
		candidates = []string{"1", "2", "3", "10"}
	}
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(c, arg.Value) {
			values = append(values, c)
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

func (a *app) addResourcesAndPrompts() {
	const readme = "# test upstream\n\nThis is the readme resource of the quiver test upstream server.\n"
	a.server.AddResource(&mcp.Resource{
		URI: "test://readme", Name: "readme", Title: "README", Description: "The test server's readme.",
		MIMEType: "text/markdown", Size: int64(len(readme)),
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "text/markdown", Text: readme,
		}}}, nil
	})
	a.server.AddPrompt(&mcp.Prompt{
		Name: "greet", Description: "Greet someone by name.",
		Arguments: []*mcp.PromptArgument{{Name: "name", Description: "who to greet", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		name := req.Params.Arguments["name"]
		if name == "" {
			return nil, errors.New("argument name is required")
		}
		return &mcp.GetPromptResult{
			Description: "A greeting",
			Messages: []*mcp.PromptMessage{{
				Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + name + "."},
			}},
		}, nil
	})
}

// addAskPrimitives adds a prompt and a resource that ask the client's user
// for input with input_required results before they answer (the go-sdk
// turns them into elicitation/create for older clients).
func (a *app) addAskPrimitives() {
	ask := mcp.InputRequestMap{"answer": &mcp.ElicitParams{Message: "password?", RequestedSchema: json.RawMessage(
		`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)}}
	answer := func(m mcp.InputResponseMap) (string, bool) {
		res, ok := m["answer"].(*mcp.ElicitResult)
		if !ok || res == nil {
			return "", false
		}
		s, _ := res.Content["answer"].(string)
		return s, true
	}
	a.server.AddPrompt(&mcp.Prompt{Name: "interview", Description: "Ask the user for a password, then greet."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			s, ok := answer(req.Params.InputResponses)
			if !ok {
				return &mcp.GetPromptResult{InputRequests: ask}, nil
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "interviewed: " + s}}}}, nil
		})
	a.server.AddResource(&mcp.Resource{URI: "test://secret", Name: "secret", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			s, ok := answer(req.Params.InputResponses)
			if !ok {
				return &mcp.ReadResourceResult{InputRequests: ask}, nil
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "secret for " + s}}}, nil
		})
}

func clamp(n int) int { return min(max(n, 0), maxBig) }

// baseTime anchors generated timestamps so outputs are reproducible.
func baseTime() time.Time { return time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC) }

// bigLog returns n deterministic log lines with timestamps and levels.
func bigLog(n int) string {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	services := []string{"api", "billing", "auth", "worker", "scheduler"}
	var b strings.Builder
	t := baseTime()
	for i := range n {
		t = t.Add(time.Duration(r.IntN(900)+1) * time.Millisecond)
		svc := services[r.IntN(len(services))]
		reqID := fmt.Sprintf("%08x", r.Uint32())
		switch p := r.IntN(100); {
		case p < 3:
			fmt.Fprintf(&b, "%s ERROR [%s] request_id=%s msg=%q err=%q attempt=%d\n",
				t.Format(time.RFC3339Nano), svc, reqID, "upstream call failed", "dial tcp 10.0.3.17:5432: connect: connection refused", r.IntN(3)+1)
		case p < 12:
			fmt.Fprintf(&b, "%s WARN  [%s] request_id=%s msg=%q latency_ms=%d threshold_ms=500\n",
				t.Format(time.RFC3339Nano), svc, reqID, "slow request", 500+r.IntN(2500))
		default:
			fmt.Fprintf(&b, "%s INFO  [%s] request_id=%s msg=%q method=GET path=/v1/items/%d status=200 latency_ms=%d line=%d\n",
				t.Format(time.RFC3339Nano), svc, reqID, "request served", r.IntN(10000), r.IntN(120)+1, i+1)
		}
	}
	return b.String()
}

// bigJSON returns a deterministic JSON object with n items.
func bigJSON(n int) (string, error) {
	r := rand.New(rand.NewPCG(uint64(n), 2))
	type item struct {
		ID       int      `json:"id"`
		Name     string   `json:"name"`
		Status   string   `json:"status"`
		Price    float64  `json:"price"`
		Tags     []string `json:"tags"`
		Created  string   `json:"created"`
		Owner    string   `json:"owner"`
		Quantity int      `json:"quantity"`
	}
	statuses := []string{"active", "archived", "pending"}
	tags := []string{"red", "green", "blue", "sale", "new", "bulk"}
	items := make([]item, n)
	for i := range items {
		items[i] = item{
			ID: i + 1, Name: fmt.Sprintf("item-%05d", i+1), Status: statuses[r.IntN(len(statuses))],
			Price: float64(r.IntN(100000)) / 100, Tags: []string{tags[r.IntN(len(tags))], tags[r.IntN(len(tags))]},
			Created: baseTime().Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
			Owner:   fmt.Sprintf("user%d@example.com", r.IntN(50)), Quantity: r.IntN(1000),
		}
	}
	b, err := json.MarshalIndent(map[string]any{
		"kind": "inventory", "count": n, "generated": baseTime().Format(time.RFC3339), "items": items,
	}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("marshal big_json: %w", err)
	}
	return string(b), nil
}

// bigCSV returns deterministic CSV text with a header and n rows.
func bigCSV(n int) (string, error) {
	r := rand.New(rand.NewPCG(uint64(n), 3))
	var b strings.Builder
	w := csv.NewWriter(&b)
	regions := []string{"eu-west", "us-east", "ap-south"}
	if err := w.Write([]string{"id", "date", "region", "product", "units", "revenue", "note"}); err != nil {
		return "", fmt.Errorf("write csv: %w", err)
	}
	for i := range n {
		rec := []string{
			strconv.Itoa(i + 1),
			baseTime().AddDate(0, 0, i%365).Format(time.DateOnly),
			regions[r.IntN(len(regions))],
			fmt.Sprintf("SKU-%04d", r.IntN(500)),
			strconv.Itoa(r.IntN(100)),
			strconv.FormatFloat(float64(r.IntN(1000000))/100, 'f', 2, 64),
			[]string{"", "promo, spring", `said "ok"`}[r.IntN(3)],
		}
		if err := w.Write(rec); err != nil {
			return "", fmt.Errorf("write csv: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return "", fmt.Errorf("write csv: %w", err)
	}
	return b.String(), nil
}
