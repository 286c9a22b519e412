package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
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
