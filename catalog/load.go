package catalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxFileBytes bounds a catalog file; larger files are refused before they
// are read. The real 3,641-tool catalog is about 4 MB.
const MaxFileBytes = 256 << 20

// ErrFormat is matched by every error about a catalog file's content.
var ErrFormat = errors.New("catalog file")

// FormatError locates a problem in a catalog file.
type FormatError struct {
	File string
	Line int // 1-based; 0 when not known
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Is makes every FormatError match ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// LoadFile reads a catalog file in any of the accepted shapes (see Decode).
func LoadFile(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return Source{}, fmt.Errorf("open catalog: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Source{}, fmt.Errorf("open catalog: %w", err)
	}
	if st.IsDir() {
		return Source{}, &FormatError{File: path, Msg: "is a directory, not a catalog file"}
	}
	if st.Size() > MaxFileBytes {
		return Source{}, &FormatError{File: path, Msg: fmt.Sprintf("%d bytes exceeds the %d-byte limit", st.Size(), MaxFileBytes)}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Source{}, fmt.Errorf("read catalog: %w", err)
	}
	return Decode(path, data)
}

// Decode parses catalog data in one of three shapes:
//
//   - JSON Lines, one tool a line: {server?, name, description, inputSchema, annotations?, _meta?}
//   - a tools/list result: {"tools": [...]}
//   - a snapshot object: {"tools": [...], "resources": [...], "prompts": [...]}
//
// A top-level JSON array of tools is accepted as well. name labels errors.
func Decode(name string, data []byte) (Source, error) {
	if len(data) > MaxFileBytes {
		return Source{}, &FormatError{File: name, Msg: fmt.Sprintf("%d bytes exceeds the %d-byte limit", len(data), MaxFileBytes)}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return Source{}, &FormatError{File: name, Msg: "empty file"}
	}
	switch trimmed[0] {
	case '[':
		var tools []ToolDef
		if err := strictUnmarshal(data, &tools); err != nil {
			return Source{}, jsonError(name, data, err)
		}
		return checkTools(name, Source{Tools: tools})
	case '{':
	default:
		return Source{}, &FormatError{File: name, Line: lineOf(data, bytes.Index(data, trimmed[:1])), Msg: "not JSON: expected '{' or '['"}
	}

	// One JSON document, or JSON Lines? Probe the first value's keys.
	dec := json.NewDecoder(bytes.NewReader(data))
	var first map[string]json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return Source{}, jsonError(name, data, err)
	}
	_, hasTools := first["tools"]
	_, hasName := first["name"]
	switch {
	case hasTools && !hasName:
		if dec.More() {
			return Source{}, &FormatError{File: name, Line: lineOf(data, int(dec.InputOffset())), Msg: "unexpected data after the catalog object"}
		}
		var src Source
		if err := strictUnmarshal(data, &src); err != nil {
			return Source{}, jsonError(name, data, err)
		}
		return checkTools(name, src)
	case hasName:
		return decodeLines(name, data)
	default:
		return Source{}, &FormatError{File: name, Line: 1, Msg: "unknown catalog shape: want JSON Lines of tools, {\"tools\": [...]} or a snapshot with tools/resources/prompts"}
	}
}

func decodeLines(name string, data []byte) (Source, error) {
	var src Source
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), MaxFileBytes)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var t ToolDef
		if err := strictUnmarshal(b, &t); err != nil {
			fe := jsonError(name, b, err).(*FormatError)
			fe.Line = line
			return Source{}, fe
		}
		if t.Name == "" {
			return Source{}, &FormatError{File: name, Line: line, Msg: "tool has no name"}
		}
		src.Tools = append(src.Tools, t)
	}
	if err := sc.Err(); err != nil {
		return Source{}, &FormatError{File: name, Line: line + 1, Msg: err.Error()}
	}
	return src, nil
}

// strictUnmarshal decodes one JSON value and refuses trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func checkTools(name string, src Source) (Source, error) {
	for i, t := range src.Tools {
		if t.Name == "" {
			return Source{}, &FormatError{File: name, Msg: fmt.Sprintf("tools[%d] has no name", i)}
		}
	}
	for i, r := range src.Resources {
		if r.URI == "" {
			return Source{}, &FormatError{File: name, Msg: fmt.Sprintf("resources[%d] has no uri", i)}
		}
	}
	for i, p := range src.Prompts {
		if p.Name == "" {
			return Source{}, &FormatError{File: name, Msg: fmt.Sprintf("prompts[%d] has no name", i)}
		}
	}
	return src, nil
}

func jsonError(name string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &FormatError{File: name, Line: lineOf(data, int(se.Offset)), Msg: "malformed JSON: " + se.Error()}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &FormatError{File: name, Line: lineOf(data, int(te.Offset)), Msg: fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{File: name, Line: lineOf(data, len(data)), Msg: "malformed JSON: unexpected end of input"}
	}
	return &FormatError{File: name, Msg: err.Error()}
}

// lineOf returns the 1-based line of byte offset off in data.
func lineOf(data []byte, off int) int {
	if off < 0 {
		off = 0
	}
	if off > len(data) {
		off = len(data)
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}
