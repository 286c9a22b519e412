package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/mcpimport"
	"github.com/quiver-mcp/quiver/runtime/units"
)

// Load reads, validates and resolves the configuration file at path. Files
// larger than MaxFileSize are refused before they are read. Relative paths
// inside the file are resolved against the file's directory. Every error is
// an *Error (matching ErrInvalid); a missing file also matches
// fs.ErrNotExist.
func Load(path string) (*Config, error) { return LoadWith(path, LoadOptions{}) }

// LoadOptions steer LoadWith.
type LoadOptions struct {
	// Environment is the environment an MCP client's file is served in:
	// guard.EnvDev when empty. It does not apply to quiver's own files,
	// which say theirs.
	Environment guard.Environment
}

// Imported describes a configuration converted from an MCP client's file
// (runtime/mcpimport) rather than written for quiver.
type Imported struct {
	// Dialect is mcpServers or servers; Client the client it most likely
	// comes from.
	Dialect, Client string
	// Servers counts the file's servers, Disabled those it disables.
	Servers, Disabled int
	// Warnings say what was moved or dropped, one line each.
	Warnings []string
	// Origins are the file's keys of the upstreams, in their order.
	Origins []string
}

// LoadWith is Load for a file that may also be an MCP client's
// configuration: the mcpServers JSON of Claude Desktop, Cursor, Claude
// Code and Windsurf, or VS Code's servers JSON. Such a file is converted
// as `quiver config import` would (without the skeleton's registry) and
// served in o.Environment, dev by default; Config.Imported then describes
// it.
func LoadWith(path string, o LoadOptions) (*Config, error) {
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
	dir := filepath.Dir(abs)
	if mcpimport.Detect(data) == "" {
		return Parse(path, data, dir)
	}
	env := o.Environment
	if env == "" {
		env = guard.EnvDev
	}
	opts, err := mcpimport.Local(abs, dir)
	if err != nil {
		return nil, &Error{File: path, Msg: oneLine(err.Error()), Err: err}
	}
	opts.Environment = string(env)
	res, err := mcpimport.Convert(path, data, opts)
	if err != nil {
		return nil, &Error{File: path, Msg: importMsg(path, err), Err: err}
	}
	cfg, err := Parse(path, res.YAML, dir)
	if err != nil {
		// The positions are in the converted YAML, which the user has
		// not seen: say where to see it.
		return nil, &Error{File: path, Msg: fmt.Sprintf("as converted from %s (see it with quiver config import %s): %s", res.Dialect, path, oneLine(err.Error())), Err: err}
	}
	cfg.Imported = &Imported{Dialect: string(res.Dialect), Client: res.Client, Servers: res.Servers, Disabled: res.Disabled, Warnings: res.Warnings, Origins: res.Origins}
	return cfg, nil
}

// importMsg is an import error's message without the file name the
// *Error adds again.
func importMsg(path string, err error) string {
	return oneLine(strings.TrimPrefix(err.Error(), path+": "))
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
