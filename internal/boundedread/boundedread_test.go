package boundedread

import (
	"errors"
	"os"
	"path/filepath"
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
