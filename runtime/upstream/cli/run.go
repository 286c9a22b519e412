package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/sandbox"
)

// maxStderr bounds what is kept of a command's stderr.
const maxStderr = 8 << 10

// CallError is a call that failed in quiver's hands: refused arguments, a
// command that could not start, ran too long or wrote too much, or output
// its parser could not read. Code is a code of runtime/codes.
type CallError struct {
	Code string
	// Msg is one line for the caller, without argument values.
	Msg string
	// Err is the cause, for the server log.
	Err error
}

// Error implements error.
func (e *CallError) Error() string { return e.Code + ": " + e.Msg }

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// Options configure an Upstream.
type Options struct {
	// Launcher builds the commands (nil: sandbox.New with defaults).
	Launcher *sandbox.Launcher
	// Policy is the sandbox of every command (nil: none).
	Policy *sandbox.Policy
	// Home is the HOME of an unsandboxed command ("" = a temporary one
	// per call).
	Home string
	// Env holds KEY=VALUE entries every command gets (resolved
	// sandbox.env names), before the manifest's own.
	Env []string
}

// Upstream is one cli upstream: its tools, by name, and how they run. It
// is immutable and safe for concurrent use.
type Upstream struct {
	name  string
	tools map[string]*Manifest
	order []*Manifest
	o     Options
}

// New returns the cli upstream name serving ms.
func New(name string, ms []*Manifest, o Options) *Upstream {
	if o.Launcher == nil {
		o.Launcher = sandbox.New(sandbox.Options{})
	}
	u := &Upstream{name: name, tools: map[string]*Manifest{}, o: o}
	for _, m := range ms {
		u.tools[m.Name] = m
		u.order = append(u.order, m)
	}
	return u
}

// Name returns the upstream's name.
func (u *Upstream) Name() string { return u.name }

// Tools returns the manifests in load order.
func (u *Upstream) Tools() []*Manifest { return slices.Clone(u.order) }

// Tool returns the manifest of the tool called name.
func (u *Upstream) Tool(name string) (*Manifest, bool) {
	m, ok := u.tools[name]
	return m, ok
}

// Check builds the argv of a call without running it: the refusal of a
// call whose arguments cannot be placed (an *ArgError), before anything
// else is spent on it.
func (u *Upstream) Check(name string, args map[string]any) error {
	m, ok := u.tools[name]
	if !ok {
		return &CallError{Code: codes.UpstreamError, Msg: "unknown tool"}
	}
	_, err := Build(m.Args, args)
	return err
}

// Call runs tool name with args, the input the runtime validated against
// the tool's schema. A non-zero exit that the manifest does not list as a
// success is a tool result with isError; quiver's own failures are
// *CallError values.
func (u *Upstream) Call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	m, ok := u.tools[name]
	if !ok {
		return nil, &CallError{Code: codes.UpstreamError, Msg: "unknown tool"}
	}
	argv, err := Build(m.Args, args)
	if err != nil {
		return nil, &CallError{Code: codes.CliArgRefused, Msg: err.Error(), Err: err}
	}
	env := slices.Clone(u.o.Env)
	keys := make([]string, 0, len(m.Env))
	for k := range m.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+m.Env[k])
	}
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	proc, err := u.o.Launcher.Command(ctx, sandbox.Spec{Name: u.name, Argv: append([]string{m.Command}, argv...),
		Env: env, Dir: m.Cwd, Home: u.o.Home, Policy: u.o.Policy})
	if err != nil {
		return nil, &CallError{Code: codes.UpstreamUnavailable, Msg: "the command could not be prepared", Err: err}
	}
	defer proc.Close()
	out, stderr, code, err := run(ctx, proc.Cmd, m.Output.MaxBytes)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, &CallError{Code: codes.ResultTooLarge, Msg: fmt.Sprintf("the command wrote more than %d bytes", m.Output.MaxBytes)}
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, &CallError{Code: codes.UpstreamTimeout, Msg: fmt.Sprintf("the command did not finish within %s", m.Timeout), Err: err}
	case ctx.Err() != nil:
		return nil, &CallError{Code: codes.Cancelled, Msg: "the call was cancelled", Err: ctx.Err()}
	case err != nil:
		return nil, &CallError{Code: codes.UpstreamUnavailable, Msg: "the command could not run", Err: err}
	}
	strip := *m.Output.StripANSI
	if !slices.Contains(m.OKExitCodes, code) {
		msg := fmt.Sprintf("exit status %d", code)
		if line := lastLine(clean(stderr, strip)); line != "" {
			msg += ": " + line
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	}
	text := clean(out, strip)
	sc, err := parse(m.Output.Parser, text)
	if err != nil {
		return nil, &CallError{Code: codes.OutputInvalid, Msg: fmt.Sprintf("the command's output is not valid %s", m.Output.Parser), Err: err}
	}
	shown := text
	if m.Output.Parser != ParserText && m.Output.Parser != ParserLines {
		b, err := json.Marshal(sc)
		if err != nil {
			return nil, &CallError{Code: codes.OutputInvalid, Msg: "the parsed output has no JSON form", Err: err}
		}
		shown = string(b)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: shown}}, StructuredContent: sc}, nil
}

// errTooLarge is the cause of a command stopped for writing too much.
var errTooLarge = errors.New("output larger than max_bytes")

// run starts cmd and waits for it, its stdout capped at max bytes (a
// command writing more is killed), stderr at maxStderr. It returns the
// exit code (-1 when killed by a signal).
func run(ctx context.Context, cmd *exec.Cmd, max int64) ([]byte, []byte, int, error) {
	stdout := &capped{max: max}
	stderr := &capped{max: maxStderr, truncate: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return nil, nil, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	over := stdout.overflow()
	select {
	case err = <-done:
	case <-ctx.Done():
		kill(cmd)
		err = <-done
	case <-over:
		kill(cmd)
		<-done
		return nil, nil, 0, errTooLarge
	}
	if stdout.exceeded() {
		return nil, nil, 0, errTooLarge
	}
	if ctx.Err() != nil {
		return nil, nil, 0, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.bytes(), stderr.bytes(), ee.ExitCode(), nil
	}
	if err != nil {
		return nil, nil, 0, err
	}
	return stdout.bytes(), stderr.bytes(), 0, nil
}

// capped is a writer that keeps at most max bytes: past that it either
// drops the rest (truncate) or refuses it and signals overflow.
type capped struct {
	max      int64
	truncate bool

	mu   sync.Mutex
	buf  bytes.Buffer
	over bool
	ch   chan struct{}
}

func (c *capped) overflow() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(c.buf.Len())
	if int64(len(p)) <= room {
		c.buf.Write(p)
		return len(p), nil
	}
	if c.truncate {
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	if !c.over {
		c.over = true
		if c.ch == nil {
			c.ch = make(chan struct{})
		}
		close(c.ch)
	}
	return 0, io.ErrShortWrite
}

func (c *capped) exceeded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// ansiRE matches ANSI escape sequences: CSI, OSC (ended by BEL or ST),
// character set designations and two-byte escapes.
var ansiRE = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()*+][0-9A-Za-z]|\x1b[@-Z\\-_]`)

// clean turns output into valid UTF-8 text, without ANSI sequences when
// strip is set.
func clean(b []byte, strip bool) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if strip {
		s = ansiRE.ReplaceAllString(s, "")
	}
	return s
}

// StripANSI removes ANSI escape sequences from s.
func StripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// lastLine is the last non-empty line of s, without control characters,
// capped at 200 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(lines[len(lines)-1]))
	if len(l) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		l = l[:cut]
	}
	return l
}

// parse turns text into the structured content of parser.
func parse(parser, text string) (any, error) {
	switch parser {
	case ParserLines:
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if text == "" {
			lines = []string{}
		}
		l := make([]any, len(lines))
		for i, s := range lines {
			l[i] = strings.TrimSuffix(s, "\r")
		}
		return map[string]any{"lines": l}, nil
	case ParserJSON:
		v, err := decodeOne(text)
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
		return map[string]any{"value": v}, nil
	case ParserJSONL:
		recs := []any{}
		for i, line := range strings.Split(text, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			v, err := decodeOne(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			recs = append(recs, v)
		}
		return map[string]any{"records": recs}, nil
	case ParserCSV:
		r := csv.NewReader(strings.NewReader(text))
		r.FieldsPerRecord = 0
		recs, err := r.ReadAll()
		if err != nil {
			return nil, err
		}
		rows := []any{}
		if len(recs) > 0 {
			header := recs[0]
			for _, rec := range recs[1:] {
				row := make(map[string]any, len(header))
				for i, h := range header {
					row[h] = rec[i]
				}
				rows = append(rows, row)
			}
		}
		return map[string]any{"rows": rows}, nil
	}
	return map[string]any{"text": text}, nil
}

// decodeOne decodes exactly one JSON value.
func decodeOne(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}
