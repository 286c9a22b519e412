package boundedread

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := File(small, 5); err != nil || string(b) != "12345" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if _, err := File(small, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := File(dir, 100); err == nil {
		t.Fatal("a directory was read")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		// Opening a FIFO for reading blocks until a writer comes; a
		// writer that opens and closes lets the open return, and the
		// file is then refused as not regular.
		go func() {
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
		}()
		if _, err := File(fifo, 100); err == nil {
			t.Fatal("a FIFO was read")
		}
	}
	if _, err := File(filepath.Join(dir, "missing"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.yaml", "a.yaml", "c.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	at := func(n string) string { return filepath.Join(dir, n) }
	got, err := Glob([]string{at("*.yaml"), at("a.*"), at("*.json")}, 3)
	if err != nil || !slices.Equal(got, []string{at("a.yaml"), at("b.yaml"), at("c.json")}) {
		t.Fatalf("Glob = %q, %v; want each glob's matches sorted, every file once", got, err)
	}
	for _, tc := range []struct {
		globs []string
		max   int
		want  string
	}{
		{[]string{at("[a-")}, 10, "syntax error in pattern"},
		{[]string{at("*.yaml"), at("none*")}, 10, "matches no file"},
		{[]string{at("*")}, 2, "more than 2 files"},
	} {
		if _, err := Glob(tc.globs, tc.max); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Glob(%q, %d) = %v; want %q", tc.globs, tc.max, err, tc.want)
		}
	}
}
