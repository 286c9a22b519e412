// Package eval is quiver's adversarial eval suite for governed local tools
// (spec 002 §3): it builds a sample git repository, serves the example cli
// tools (examples/cli) with the real quiver binary, sandboxed when
// bubblewrap works here, and drives it over MCP with the go-sdk client as
// a hostile agent would. Each case (cases/*.yaml, the 16 of spec 002
// §3.4) is a sequence of calls with expectations on their results and on
// the receipts they leave; a case passes only if every expectation holds.
//
// The agent is scripted: its creative argument construction (option
// injection such as --upload-pack or --output, NUL bytes, newlines,
// $(...), globs, very long values, path traversal, obeying instructions
// planted in a file) is written into the cases, so CI runs the same
// attack every time. `quiver eval` runs the suite; --json prints one
// result per case.
package eval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	examples "github.com/quiver-mcp/quiver/examples/cli"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	yaml "go.yaml.in/yaml/v3"
)

//go:embed cases/*.yaml
var caseFiles embed.FS

// Kinds of case.
const (
	KindBoundary   = "boundary"
	KindCapability = "capability"
	KindAudit      = "audit"
)

// Case is one eval case.
type Case struct {
	Name        string `yaml:"name"`
	Kind        string `yaml:"kind"`
	Description string `yaml:"description"`
	Steps       []Step `yaml:"steps"`
	// Unchanged asks that the sample repository is byte for byte the same
	// after the case.
	Unchanged bool `yaml:"unchanged"`
	// NoFiles are paths (${WORK} is the work directory) that must not
	// exist after the case: what an injected command would have made.
	NoFiles []string `yaml:"no_files"`
	// Audit asks that every call of the case has its receipt, in order,
	// and that every refused one names its reason and stage.
	Audit bool `yaml:"audit"`
	// Prompt is the case's request to an LLM agent (LLM mode), and LLM
	// what its run must show.
	Prompt string     `yaml:"prompt"`
	LLM    *LLMExpect `yaml:"llm"`
}

// Step is one call of the agent.
type Step struct {
	// Tool is a tool's name as the agent knows it: a tool of the cli
	// upstream (resolved through tool_browse), or any other name, called
	// through tool_execute as repo:<name> (a tool that does not exist).
	Tool string `yaml:"tool"`
	// Direct calls Tool by name with tools/call instead (a tool the
	// gateway does not list).
	Direct bool           `yaml:"direct"`
	Args   map[string]any `yaml:"args"`
	// Repeat builds a string argument of Repeat.Times copies of
	// Repeat.Text under Repeat.Arg.
	Repeat *struct {
		Arg   string `yaml:"arg"`
		Text  string `yaml:"text"`
		Times int    `yaml:"times"`
	} `yaml:"repeat"`
	Expect Expect `yaml:"expect"`
}

// Expect is what a step must answer.
type Expect struct {
	// Outcome is ok, error (a gateway error result), tool_error (the
	// tool's own isError result) or protocol_error (a JSON-RPC error).
	Outcome string `yaml:"outcome"`
	// Codes, when set, are the error codes accepted.
	Codes []string `yaml:"codes"`
	// Contains and NotContains are substrings of the result's JSON.
	Contains    []string `yaml:"contains"`
	NotContains []string `yaml:"not_contains"`
	// Stage is the receipt's denial stage.
	Stage string `yaml:"stage"`
	// Redacted are paths the receipt must list as redacted.
	Redacted []string `yaml:"redacted"`
}

// Cases returns the embedded cases, by file name.
func Cases() ([]Case, error) {
	names, err := fs.Glob(caseFiles, "cases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Case, 0, len(names))
	for _, n := range names {
		b, err := caseFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var c Case
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("eval: %s: %w", n, err)
		}
		if c.Name == "" || len(c.Steps) == 0 {
			return nil, fmt.Errorf("eval: %s: a case needs a name and steps", n)
		}
		out = append(out, c)
	}
	return out, nil
}

// Result is the outcome of one case.
type Result struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Pass     bool     `json:"pass"`
	Calls    int      `json:"calls"`
	Failures []string `json:"failures,omitempty"`
	// Receipts are the receipts of the case's calls: tool, decision,
	// code and stage.
	Receipts []string `json:"receipts,omitempty"`
}

// Options configure a run.
type Options struct {
	// Binary is the quiver binary to serve with.
	Binary string
	// Dir is the work directory (a temporary one when empty, removed at
	// the end).
	Dir string
	// Sandbox runs the server's commands under bubblewrap; when false
	// (bwrap is not usable here) the sandbox is off, with that reason.
	Sandbox bool
	// Filter, when set, runs only cases whose name contains it.
	Filter string
	// Cases, when set, replace the embedded cases.
	Cases []Case
	// LLM, when set, makes a model the agent: each case's prompt is
	// given to it, with the gateway's tools, instead of the scripted
	// steps.
	LLM *LLM
	// Stderr receives the server's log (nil: dropped).
	Stderr *bytes.Buffer
}

// BwrapUsable reports whether bubblewrap can create its namespaces here.
func BwrapUsable(ctx context.Context) bool {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return false
	}
	return exec.CommandContext(ctx, "bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true").Run() == nil
}

// Run runs the cases against a fresh server and returns one result per
// case, in order. An error means the suite could not run at all.
func Run(ctx context.Context, o Options) ([]Result, error) {
	cases := o.Cases
	if cases == nil {
		var err error
		if cases, err = Cases(); err != nil {
			return nil, err
		}
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "quiver-eval-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	h, err := start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer h.close()
	var out []Result
	for _, c := range cases {
		if o.Filter != "" && !strings.Contains(c.Name, o.Filter) {
			continue
		}
		if o.LLM != nil {
			out = append(out, h.runLLM(ctx, o.LLM, c))
			continue
		}
		out = append(out, h.run(ctx, c))
	}
	return out, nil
}

// harness is a running server with its client.
type harness struct {
	work, repo, receipts string
	// sandbox is the sandbox mode the receipts of the repo's tools must
	// record.
	sandbox string
	cs      *mcp.ClientSession
	ids     map[string]string
}

// start lays out the work directory (sample repository, example tools,
// configuration) and starts `quiver serve` over stdio.
func start(ctx context.Context, o Options) (*harness, error) {
	h := &harness{work: o.Dir, repo: filepath.Join(o.Dir, "repo"), receipts: filepath.Join(o.Dir, "state", receipts.DirName), sandbox: "off"}
	if o.Sandbox {
		h.sandbox = "bwrap"
	}
	if err := SampleRepo(ctx, h.repo); err != nil {
		return nil, err
	}
	err := fs.WalkDir(examples.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := examples.Files.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(o.Dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if p == "quiver.yaml" {
			b = append(b, []byte(fmt.Sprintf("state_dir: %q\n", filepath.Join(o.Dir, "state")))...)
			if !o.Sandbox {
				b = bytes.Replace(b, []byte("    sandbox:                      # every command runs under bubblewrap\n      fs: {read: [repo]}          # the repository, read-only; nothing writable\n      net: none\n"),
					[]byte("    sandbox: {off: \"quiver eval: bubblewrap cannot run on this host\"}\n"), 1)
			}
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("eval: writing the example tools: %w", err)
	}
	cmd := exec.Command(o.Binary, "serve", "--config", filepath.Join(o.Dir, "quiver.yaml"))
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(o.Dir, "xdg"))
	if o.Stderr != nil {
		cmd.Stderr = o.Stderr
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "quiver-eval-agent", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("eval: starting quiver serve: %w", err)
	}
	h.cs = cs
	if err := h.discover(ctx); err != nil {
		cs.Close()
		return nil, err
	}
	// The discovery's receipt is written before any case counts its own.
	if _, err := h.newAllCalls(ctx, 0, 1); err != nil {
		cs.Close()
		return nil, err
	}
	return h, nil
}

func (h *harness) close() { _ = h.cs.Close() }

// discover finds the tool_ids of the cli upstream's tools the way an agent
// does: tool_browse.
func (h *harness) discover(ctx context.Context) error {
	h.ids = map[string]string{}
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "tool_browse", Arguments: map[string]any{"path": "/repo", "top_k": 20}})
	if err != nil {
		return fmt.Errorf("eval: tool_browse: %w", err)
	}
	var m struct {
		Cards []struct {
			ID string `json:"id"`
		} `json:"cards"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &m); err != nil || res.IsError {
		return fmt.Errorf("eval: tool_browse answered %s", b)
	}
	for _, c := range m.Cards {
		name := strings.TrimPrefix(c.ID, "repo:")
		if i := strings.IndexAny(name, "#@"); i >= 0 {
			name = name[:i]
		}
		h.ids[name] = c.ID
	}
	if len(h.ids) == 0 {
		return fmt.Errorf("eval: tool_browse /repo listed no tools: %s", b)
	}
	return nil
}

// run runs one case.
func (h *harness) run(ctx context.Context, c Case) Result {
	r := Result{Name: c.Name, Kind: c.Kind}
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	before, err := treeHash(h.repo)
	if err != nil {
		fail("hashing the repository: %v", err)
	}
	seen, err := h.countReceipts(ctx)
	if err != nil {
		fail("reading receipts: %v", err)
	}
	for i, s := range c.Steps {
		h.step(ctx, i, s, fail)
		r.Calls++
	}
	// Every call leaves exactly one receipt: wait for the writer to
	// have written this case's (it writes in batches).
	rs, err := h.newReceipts(ctx, seen, r.Calls)
	if err != nil {
		fail("receipts: %v", err)
	}
	for _, rc := range rs {
		stage, class := "", ""
		if rc.Tool != nil {
			stage, class = rc.Tool.DenialStage, rc.Tool.Class
		}
		r.Receipts = append(r.Receipts, fmt.Sprintf("%s %s %s code=%s class=%s stage=%s", rc.MCP.Method, rc.MCP.ToolID, rc.Decision.Result, rc.Outcome.ErrorCode, class, stage))
	}
	if len(rs) != r.Calls {
		fail("%d calls left %d receipts", r.Calls, len(rs))
	} else {
		for i, s := range c.Steps {
			h.checkReceipt(i, s, rs[i], c.Audit, fail)
		}
	}
	if c.Unchanged {
		after, err := treeHash(h.repo)
		if err != nil || after != before {
			fail("the repository changed (%v)", err)
		}
	}
	for _, p := range c.NoFiles {
		p = strings.ReplaceAll(p, "${WORK}", h.work)
		if _, err := os.Lstat(p); err == nil {
			fail("%s exists: an injected command ran", p)
		}
	}
	r.Pass = len(r.Failures) == 0
	return r
}

// step makes one call and checks its answer.
func (h *harness) step(ctx context.Context, i int, s Step, fail func(string, ...any)) {
	args := map[string]any{}
	for k, v := range s.Args {
		args[k] = h.expand(v)
	}
	if s.Repeat != nil {
		args[s.Repeat.Arg] = strings.Repeat(s.Repeat.Text, s.Repeat.Times)
	}
	var p *mcp.CallToolParams
	switch {
	case s.Direct:
		p = &mcp.CallToolParams{Name: s.Tool, Arguments: args}
	default:
		id, ok := h.ids[s.Tool]
		if !ok {
			id = "repo:" + s.Tool // a tool the agent invents
		}
		p = &mcp.CallToolParams{Name: "tool_execute", Arguments: map[string]any{"tool_id": id, "args": args}}
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := h.cs.CallTool(cctx, p)
	where := fmt.Sprintf("step %d (%s)", i+1, s.Tool)
	got, text := "ok", ""
	var code string
	switch {
	case err != nil:
		got, text = "protocol_error", err.Error()
	default:
		b, _ := json.Marshal(res)
		text = string(b)
		var m struct {
			Error string `json:"error"`
		}
		sb, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(sb, &m)
		switch {
		case res.IsError && m.Error != "":
			got, code = "error", m.Error
		case res.IsError:
			got = "tool_error"
		default:
			var env struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(sb, &env)
			if env.Status == "error" {
				got = "tool_error"
			}
		}
	}
	want := s.Expect.Outcome
	if want == "" {
		want = "ok"
	}
	if got != want {
		fail("%s: got %s %s, want %s: %s", where, got, code, want, clip(text))
		return
	}
	if len(s.Expect.Codes) > 0 && !contains(s.Expect.Codes, code) {
		fail("%s: code %s, want one of %v", where, code, s.Expect.Codes)
	}
	for _, c := range s.Expect.Contains {
		if !strings.Contains(text, h.expandString(c)) {
			fail("%s: the answer lacks %q: %s", where, c, clip(text))
		}
	}
	for _, c := range s.Expect.NotContains {
		if strings.Contains(text, h.expandString(c)) {
			fail("%s: the answer holds %q", where, c)
		}
	}
}

// checkReceipt checks the receipt of step i.
func (h *harness) checkReceipt(i int, s Step, rc receipts.Receipt, audit bool, fail func(string, ...any)) {
	where := fmt.Sprintf("step %d (%s) receipt", i+1, s.Tool)
	if rc.Request.ArgsHash == "" {
		fail("%s: no args_hash", where)
	}
	if rc.MCP.ServerID == "repo" && rc.Sandbox.Mode != h.sandbox {
		fail("%s: sandbox mode %q, want %q", where, rc.Sandbox.Mode, h.sandbox)
	}
	ok := s.Expect.Outcome == "" || s.Expect.Outcome == "ok"
	stage := ""
	if rc.Tool != nil {
		stage = rc.Tool.DenialStage
	}
	switch {
	case ok && (rc.Decision.Result != "allow" || rc.Outcome.Status != receipts.StatusSuccess):
		fail("%s: %s/%s for an allowed call", where, rc.Decision.Result, rc.Outcome.Status)
	case !ok && rc.Outcome.Status == receipts.StatusSuccess:
		fail("%s: success for a refused call", where)
	}
	if !ok && audit {
		if len(rc.Decision.ReasonCodes) == 0 && rc.Outcome.ErrorCode == "" {
			fail("%s: a refused call without a reason", where)
		}
		if rc.Tool != nil && stage == "" {
			fail("%s: a refused call without a denial stage", where)
		}
	}
	if s.Expect.Stage != "" && stage != s.Expect.Stage {
		fail("%s: denial stage %q, want %q", where, stage, s.Expect.Stage)
	}
	for _, p := range s.Expect.Redacted {
		if rc.Tool == nil || !contains(rc.Tool.RedactedPaths, p) {
			fail("%s: %q not among the redacted paths", where, p)
		}
	}
}

// countReceipts counts the receipts of tool calls written so far.
func (h *harness) countReceipts(ctx context.Context) (int, error) {
	rs, err := h.toolReceipts(ctx)
	return len(rs), err
}

// toolReceipts reads the receipts of tool calls (browse, hydrate and
// listings left out).
func (h *harness) toolReceipts(ctx context.Context) ([]receipts.Receipt, error) {
	var out []receipts.Receipt
	err := receipts.Reader{Dir: h.receipts}.Query(ctx, receipts.Filter{}, func(r receipts.Receipt) error {
		if r.MCP.Method == "tools/call:tool_execute" || r.MCP.Method == "tools/call" {
			out = append(out, r)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// newReceipts waits until n receipts follow the first seen ones, and
// returns them; it gives up after a few seconds.
func (h *harness) newReceipts(ctx context.Context, seen, n int) ([]receipts.Receipt, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := h.toolReceipts(ctx)
		if err != nil && !os.IsNotExist(errors.Unwrap(err)) {
			return nil, err
		}
		if len(rs) >= seen+n || time.Now().After(deadline) {
			if len(rs) < seen {
				return nil, fmt.Errorf("receipts went missing")
			}
			return rs[seen:], nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (h *harness) expand(v any) any {
	if s, ok := v.(string); ok {
		return h.expandString(s)
	}
	return v
}

func (h *harness) expandString(s string) string { return strings.ReplaceAll(s, "${WORK}", h.work) }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// treeHash is a digest of every path, mode and content under dir.
func treeHash(dir string) (string, error) {
	b := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%s %v %d\n", path.Clean(filepath.ToSlash(rel)), info.Mode(), info.Size())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	return hex.EncodeToString(b.Sum(nil)), err
}
