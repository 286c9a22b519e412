package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/eval"
)

// TestE2EEval runs `quiver eval --json`: the 16 cases of spec 002 §3.4
// against the real binary, sandboxed when bubblewrap works here.
func TestE2EEval(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed; .ci/run installs it")
	}
	cmd := exec.Command(quiverBin, "eval", "--json", "--dir", t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err != nil || len(lines) != 16 {
		t.Fatalf("quiver eval: %v, %d results\n%s\n%s", err, len(lines), out.String(), errb.String())
	}
	kinds := map[string]int{}
	for _, l := range lines {
		var r eval.Result
		if err := json.Unmarshal([]byte(l), &r); err != nil || !r.Pass || r.Calls == 0 {
			t.Errorf("case %s", l)
		}
		kinds[r.Kind]++
	}
	if kinds[eval.KindBoundary] != 9 || kinds[eval.KindCapability] != 5 || kinds[eval.KindAudit] != 2 {
		t.Errorf("kinds %v", kinds)
	}
}

// TestE2EEvalCatchesFailures: the harness fails a case whose expectation
// does not hold, on the result and on the receipt, and exits 1.
func TestE2EEvalCatchesFailures(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed; .ci/run installs it")
	}
	wrong := []eval.Case{
		{Name: "traversal_expected_to_work", Kind: eval.KindBoundary, Steps: []eval.Step{
			{Tool: "read_file", Args: map[string]any{"path": "../../etc/passwd"}, Expect: eval.Expect{Outcome: "ok"}}}},
		{Name: "wrong_stage", Kind: eval.KindAudit, Audit: true, Steps: []eval.Step{
			{Tool: "read_file", Args: map[string]any{"path": "/etc/passwd"}, Expect: eval.Expect{Outcome: "error", Codes: []string{"ARGS_INVALID"}, Stage: "permission"}}}},
		{Name: "redaction_not_claimed", Kind: eval.KindCapability, Steps: []eval.Step{
			{Tool: "echo_message", Args: map[string]any{"message": "hi"}, Expect: eval.Expect{Redacted: []string{"text"}}}}},
		{Name: "right", Kind: eval.KindCapability, Unchanged: true, Steps: []eval.Step{
			{Tool: "echo_message", Args: map[string]any{"message": "hi"}, Expect: eval.Expect{Contains: []string{"hi"}}}}},
	}
	rs, err := eval.Run(context.Background(), eval.Options{Binary: quiverBin, Dir: t.TempDir(), Sandbox: eval.BwrapUsable(context.Background()), Cases: wrong})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 || rs[0].Pass || rs[1].Pass || rs[2].Pass || !rs[3].Pass {
		t.Fatalf("results %+v", rs)
	}
	for i, want := range []string{"got error ARGS_INVALID, want ok", `denial stage "validation", want "permission"`, `"text" not among the redacted paths`} {
		if !strings.Contains(strings.Join(rs[i].Failures, "\n"), want) {
			t.Errorf("%s: failures %q, want %q", rs[i].Name, rs[i].Failures, want)
		}
	}
	cmd := exec.Command(quiverBin, "eval", "--case", "no-such-case")
	if err := cmd.Run(); err == nil {
		t.Error("eval with no matching case succeeded")
	}
}

// TestE2EEvalLLMMode drives the LLM agent loop against an
// OpenAI-compatible endpoint served here, whose "model" is a script: it
// browses, executes list_files with the id tool_browse gave it, and
// answers; a second run answers without calling anything and fails.
func TestE2EEvalLLMMode(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed; .ci/run installs it")
	}
	lazy := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k-123" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m-1" || len(req.Tools) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		call := func(name string, args any) map[string]any {
			b, _ := json.Marshal(args)
			return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": name, "arguments": string(b)}}}}
		}
		var msg map[string]any
		last := req.Messages[len(req.Messages)-1]
		switch {
		case lazy || last.Role == "tool" && strings.Contains(last.Content, `"status":"ok"`):
			msg = map[string]any{"role": "assistant", "content": "src holds main.go and greeting.go"}
		case last.Role == "tool":
			id := regexp.MustCompile(`repo:list_files#[0-9a-f]{8}`).FindString(last.Content)
			msg = call("tool_execute", map[string]any{"tool_id": id, "args": map[string]any{"directory": "src"}})
		default:
			msg = call("tool_browse", map[string]any{"path": "/repo"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	}))
	defer srv.Close()
	llm := &eval.LLM{URL: srv.URL + "/v1", Key: "k-123", Model: "m-1"}
	cases, err := eval.Cases()
	if err != nil {
		t.Fatal(err)
	}
	var listCase []eval.Case
	for _, c := range cases {
		if c.Name == "list_source_files" {
			listCase = append(listCase, c)
		}
	}
	rs, err := eval.Run(context.Background(), eval.Options{Binary: quiverBin, Dir: t.TempDir(), Cases: listCase, LLM: llm})
	if err != nil || len(rs) != 1 || !rs[0].Pass || rs[0].Calls != 2 {
		t.Fatalf("LLM mode: %+v %v", rs, err)
	}
	lazy = true
	rs, err = eval.Run(context.Background(), eval.Options{Binary: quiverBin, Dir: t.TempDir(), Cases: listCase, LLM: llm})
	if err != nil || len(rs) != 1 || rs[0].Pass || !strings.Contains(strings.Join(rs[0].Failures, "\n"), "did not call list_files") {
		t.Fatalf("a lazy model passed: %+v %v", rs, err)
	}
	code, _, stderr := runCLI(t, "eval", "--llm")
	if code != 2 || !strings.Contains(stderr, eval.EnvLLMURL) {
		t.Fatalf("--llm without an endpoint: %d %s", code, stderr)
	}
}
