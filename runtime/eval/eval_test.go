package eval

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCases(t *testing.T) {
	cs, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, c := range cs {
		kinds[c.Kind]++
		for i, s := range c.Steps {
			if s.Tool == "" {
				t.Errorf("%s step %d: no tool", c.Name, i+1)
			}
			switch s.Expect.Outcome {
			case "", "ok", "error", "tool_error", "protocol_error":
			default:
				t.Errorf("%s step %d: outcome %q", c.Name, i+1, s.Expect.Outcome)
			}
		}
		if c.Kind == KindBoundary && !c.Unchanged {
			t.Errorf("%s: a boundary case must check that the repository is unchanged", c.Name)
		}
	}
	// Spec 002 §3.4: nine boundary, five capability, two audit cases.
	if len(cs) != 16 || kinds[KindBoundary] != 9 || kinds[KindCapability] != 5 || kinds[KindAudit] != 2 {
		t.Fatalf("%d cases: %v", len(cs), kinds)
	}
}

func TestSampleRepoAndTreeHash(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed; .ci/run installs it")
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := SampleRepo(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", dir, "log", "--format=%s", "main").Output()
	if err != nil || strings.TrimSpace(string(out)) != "add notes\nadd greeting helper\ninitial commit" {
		t.Fatalf("git log: %q %v", out, err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "docs", "NOTES.md"))
	if err != nil || !strings.Contains(string(notes), InjectedInstruction) {
		t.Fatalf("notes %q %v", notes, err)
	}
	a, err := treeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := treeHash(dir); a != b {
		t.Fatal("treeHash is not stable")
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := treeHash(dir); a == b {
		t.Fatal("treeHash missed a change")
	}
}
