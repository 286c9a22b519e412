// Package boundedread reads files from outside quiver (manifests,
// configuration files of MCP clients) with a size limit that is checked
// before any byte is read: a file that is too large, or that is not a
// regular file (a FIFO, a device), is refused without blocking or
// allocating for it.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// ErrTooLarge is matched by the error for a file over the limit.
var ErrTooLarge = errors.New("larger than the limit")

// File returns the contents of the regular file name, refusing one of
// more than limit bytes (also one that grows past it while it is read).
func File(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, %w of %d", name, st.Size(), ErrTooLarge, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes, %w of %d", name, limit, ErrTooLarge, limit)
	}
	return data, nil
}

// Glob returns the files globs match, each glob's matches in lexical order
// and every file once, refusing a malformed glob, a glob that matches
// nothing (a mistyped path is an error, not an empty set) and more than max
// files, before any of them is read.
func Glob(globs []string, max int) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		files, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", g, err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("glob %q matches no file", g)
		}
		sort.Strings(files)
		for _, f := range files {
			if seen[f] {
				continue
			}
			seen[f] = true
			if len(out) == max {
				return nil, fmt.Errorf("more than %d files", max)
			}
			out = append(out, f)
		}
	}
	return out, nil
}
