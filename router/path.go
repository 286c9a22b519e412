package router

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxPathBytes is the longest path ParsePath accepts, in bytes. A longer
// string is refused before any parsing, so hostile input costs nothing.
const MaxPathBytes = 1024

// maxSegmentBytes is the longest segment of §3.2: one leading character
// followed by at most 63 more.
const maxSegmentBytes = 64

// AllSegment is the reserved segment "*": all children of the node before
// it (spec 003 §3.2).
const AllSegment = "*"

// Path is a parsed ChoiceGraph path (spec 003 §3.2).
//
// The reserved segment "*" ("all children at this level") is accepted only
// as the last segment and is recorded in All, never in Segments: it is
// equivalent to omitting it, so "/github/issues/*" addresses the same node
// as "/github/issues" and "/*" the same as "/". Allowing it anywhere else
// would give "*" a wildcard meaning the spec does not define; refusing it
// keeps the reserved token free for the filtered forms the spec anticipates.
type Path struct {
	// Segments are the node names from the root down, without a trailing
	// "*". Empty for the root.
	Segments []string
	// All reports that the path ended in the segment "*".
	All bool
}

// String formats the path: "/" for the root, "/a/b" otherwise, with a
// trailing "/*" when All is set. For a Path returned by ParsePath it is the
// string that was parsed.
func (p Path) String() string {
	if len(p.Segments) == 0 {
		if p.All {
			return "/" + AllSegment
		}
		return "/"
	}
	var b strings.Builder
	for _, s := range p.Segments {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if p.All {
		b.WriteString("/" + AllSegment)
	}
	return b.String()
}

// Node returns the canonical path of the addressed node: String without a
// trailing "*" ("/" for the root). It is the id of an internal card.
func (p Path) Node() string {
	return Path{Segments: p.Segments}.String()
}

// IsRoot reports whether the path addresses the root ("/" or "/*").
func (p Path) IsRoot() bool { return len(p.Segments) == 0 }

// ParsePath parses s per spec 003 §3.2:
//
//	path    = "/" [ segment ( "/" segment )* ]
//	segment = ( [a-z0-9] [a-z0-9_-]{0,63} ) | "*"
//
// A bare "/" is the root. A trailing "/" and empty segments are invalid.
// Segments are case-sensitive lower case. The first segment names a
// namespace and must also begin with a letter (§1.1). "*" is accepted only
// as the last segment (see Path). Strings longer than MaxPathBytes are
// refused unparsed. Errors wrap ErrPathInvalid and give a one-line reason.
func ParsePath(s string) (Path, error) {
	if len(s) > MaxPathBytes {
		return Path{}, fmt.Errorf("%w: longer than %d bytes", ErrPathInvalid, MaxPathBytes)
	}
	if s == "" {
		return Path{}, fmt.Errorf("%w: empty; the root is \"/\"", ErrPathInvalid)
	}
	if s[0] != '/' {
		return Path{}, fmt.Errorf("%w: %s does not start with \"/\"", ErrPathInvalid, quotePath(s))
	}
	if s == "/" {
		return Path{}, nil
	}
	if s[len(s)-1] == '/' {
		return Path{}, fmt.Errorf("%w: %s has a trailing \"/\"", ErrPathInvalid, quotePath(s))
	}
	raw := strings.Split(s[1:], "/")
	var p Path
	for i, seg := range raw {
		if seg == AllSegment {
			if i != len(raw)-1 {
				return Path{}, fmt.Errorf("%w: %s: \"*\" is allowed only as the last segment", ErrPathInvalid, quotePath(s))
			}
			p.All = true
			break
		}
		if why := segmentProblem(seg, i == 0); why != "" {
			return Path{}, fmt.Errorf("%w: %s: segment %d %s", ErrPathInvalid, quotePath(s), i+1, why)
		}
		p.Segments = append(p.Segments, seg)
	}
	return p, nil
}

// ValidSegment reports whether seg is a valid non-root segment of §3.2
// (not "*"). Graph builders use it to check the names they make.
func ValidSegment(seg string) bool { return segmentProblem(seg, false) == "" }

// segmentProblem returns why seg is not a valid segment, or "". A root-level
// segment must also begin with a letter (the namespace grammar).
func segmentProblem(seg string, root bool) string {
	switch {
	case seg == "":
		return "is empty"
	case len(seg) > maxSegmentBytes:
		return "is longer than " + strconv.Itoa(maxSegmentBytes) + " characters"
	}
	c := seg[0]
	if root && !(c >= 'a' && c <= 'z') {
		return "(a namespace) must start with a lower-case letter"
	}
	if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
		return "must start with a lower-case letter or a digit"
	}
	for i := 1; i < len(seg); i++ {
		c := seg[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "has a character outside [a-z0-9_-]"
		}
	}
	return ""
}

// quotePath quotes a path for an error message: Go-quoted (so control
// characters cannot break the line) and cut to a readable length.
func quotePath(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
