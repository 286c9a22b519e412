package config

import (
	"errors"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/internal/textclean"
)

// ErrInvalid is matched (with errors.Is) by every *Error: the file cannot be
// used as a configuration, whether it is missing, too large, not YAML, or
// breaks the schema or a semantic rule.
var ErrInvalid = errors.New("invalid configuration")

// Error reports one problem with a configuration file, positioned at the
// key (or list item) it concerns.
type Error struct {
	// File is the file name as given to Load or Parse.
	File string
	// Line and Column are 1-based; 0 when the problem has no position
	// (an unreadable or oversized file).
	Line, Column int
	// Field names the setting in the file's own terms, e.g.
	// "upstreams[1].trust_level"; "" for the whole file.
	Field string
	// Msg says what is wrong, in one line.
	Msg string
	// Err is the underlying cause, if any (for example fs.ErrNotExist).
	Err error
}

// Error formats the problem as FILE:LINE:COL: FIELD: MSG, leaving out the
// parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// oneLine collapses s to one line without control characters, capped at
// 300 bytes, for messages that quote outside text.
func oneLine(s string) string { return textclean.OneLine(s, 300) }
