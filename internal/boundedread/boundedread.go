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
