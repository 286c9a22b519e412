package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quiver-mcp/quiver/runtime/units"
)

// Load reads, validates and resolves the configuration file at path. Files
// larger than MaxFileSize are refused before they are read. Relative paths
// inside the file are resolved against the file's directory. Every error is
// an *Error (matching ErrInvalid); a missing file also matches
// fs.ErrNotExist.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot open: " + oneLine(unwrapPathError(err).Error()), Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot stat: " + oneLine(unwrapPathError(err).Error()), Err: err}
	}
	if st.IsDir() {
		return nil, &Error{File: path, Msg: "is a directory, not a configuration file"}
	}
	if st.Size() > MaxFileSize {
		return nil, tooLarge(path, st.Size())
	}
	// The size may change, or not be known (a pipe): read at most one byte
	// more than allowed.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read: " + oneLine(unwrapPathError(err).Error()), Err: err}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot resolve the file's directory: " + oneLine(err.Error()), Err: err}
	}
	return Parse(path, data, filepath.Dir(abs))
}

// Parse validates and resolves a configuration held in data. name is used
// in error messages and as Config.Source; baseDir is the directory relative
// paths are resolved against (made absolute first). Parse never panics on
// any input; data larger than MaxFileSize is refused.
func Parse(name string, data []byte, baseDir string) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(name, int64(len(data)))
	}
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, &Error{File: name, Msg: "cannot resolve the base directory: " + oneLine(err.Error()), Err: err}
	}
	t, perr := parseTree(name, data)
	if perr != nil {
		return nil, perr
	}
	if err := validateSchema(t); err != nil {
		return nil, err
	}
	return build(t, abs)
}

func tooLarge(name string, size int64) *Error {
	return &Error{File: name, Msg: fmt.Sprintf("file is %d bytes, larger than the limit of %d (%s)", size, MaxFileSize, units.FormatSize(MaxFileSize))}
}

// unwrapPathError drops the *PathError wrapper, whose text repeats the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
