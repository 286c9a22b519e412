// Package argguard checks the arguments of a tool call before anything is
// dispatched (spec 001 MUST 7): structural limits on every call
// (Preflight), and per upstream, path arguments against a workspace and
// URL arguments against an egress allowlist. They are argument checks,
// not a sandbox: they see what the caller asks for, not what the upstream
// process does.
package argguard

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/egress"
)

// Structural limits on tool arguments, checked before anything else looks
// at them. Upstream schemas may allow more; the gateway does not pass
// model-generated input past these bounds.
const (
	MaxDepth  = 32      // nesting of objects and arrays
	MaxNodes  = 100_000 // values of every kind, keys included
	MaxString = 4 << 20 // bytes of one string (a document fits; guards bound documents further)
	MaxKeyLen = 1024    // bytes of one object key
)

// The receipt reason codes of the guards' refusals, after the error code
// (PATH_OUTSIDE_WORKSPACE, EGRESS_BLOCKED).
const (
	// ReasonEgressHostNotAllowed is the reason code of an egress refusal;
	// it is followed by the host's digest (egress.HostReason), never the
	// host, path or query of the URL.
	ReasonEgressHostNotAllowed = "EGRESS_HOST_NOT_ALLOWED"
	// ReasonWorkspaceEscape is the reason code of a workspace refusal.
	ReasonWorkspaceEscape = "WORKSPACE_ESCAPE"
)

// Refusal is a guard's refusal of a call.
type Refusal struct {
	// Code is the wire error code (runtime/codes).
	Code string
	// Message is one line for the caller; it names the argument, never
	// its value.
	Message string
	// Path locates the refused value ("args" or a JSON pointer below it).
	Path string
	// Arg is the refused argument's key, Host the refused destination as
	// receipted (egress only).
	Arg, Host string
	// Reasons are the receipt's reason codes after the error code.
	Reasons []string
	// Unknown are the JSON pointers of the argument names a strict_args
	// check refused (at most 20).
	Unknown []string
}

func invalid(path, format string, args ...any) *Refusal {
	return &Refusal{Code: codes.ArgsInvalid, Path: path, Message: fmt.Sprintf(format, args...)}
}

// Preflight checks the structure of decoded arguments against the limits.
func Preflight(args map[string]any) *Refusal {
	nodes := 0
	var walk func(v any, depth int, path string) *Refusal
	walk = func(v any, depth int, path string) *Refusal {
		nodes++
		if nodes > MaxNodes {
			return invalid("args", "arguments hold more than %d values", MaxNodes)
		}
		if depth > MaxDepth {
			return invalid("args"+path, "arguments nest deeper than %d levels", MaxDepth)
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if len(k) > MaxKeyLen {
					return invalid("args"+path, "an argument key is longer than %d bytes", MaxKeyLen)
				}
				nodes++
				if e := walk(c, depth+1, path+"/"+k); e != nil {
					return e
				}
			}
		case []any:
			for i, c := range x {
				if e := walk(c, depth+1, fmt.Sprintf("%s/%d", path, i)); e != nil {
					return e
				}
			}
		case string:
			if len(x) > MaxString {
				return invalid("args"+path, "a string argument is longer than %d bytes", MaxString)
			}
		}
		return nil
	}
	return walk(args, 0, "")
}

// Workspace checks args against g; nil when every path argument is
// inside a root.
func Workspace(g *config.Workspace, args map[string]any) *Refusal {
	keys := keySet(g.PathArgs)
	if len(keys) == 0 {
		keys = keySet(config.DefaultPathArgs())
	}
	var walk func(v any, depth int) *Refusal
	var value func(key string, v any, depth int) *Refusal
	value = func(key string, v any, depth int) *Refusal {
		if depth > MaxDepth+1 {
			return nil // preflight bounds the depth
		}
		switch x := v.(type) {
		case string:
			if !insideRoots(g.Roots, x) {
				return &Refusal{Code: codes.PathOutsideWorkspace, Path: "args", Arg: key, Reasons: []string{ReasonWorkspaceEscape},
					Message: fmt.Sprintf("argument %q names a path outside this upstream's workspace", key)}
			}
		case []any:
			for _, c := range x {
				if e := value(key, c, depth+1); e != nil {
					return e
				}
			}
		default:
			return walk(v, depth)
		}
		return nil
	}
	walk = func(v any, depth int) *Refusal {
		if depth > MaxDepth+1 {
			return nil
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if keys[strings.ToLower(k)] {
					if e := value(k, c, depth+1); e != nil {
						return e
					}
					continue
				}
				if e := walk(c, depth+1); e != nil {
					return e
				}
			}
		case []any:
			for _, c := range x {
				if e := walk(c, depth+1); e != nil {
					return e
				}
			}
		}
		return nil
	}
	return walk(args, 0)
}

// insideRoots reports whether the path p, cleaned lexically and taken
// relative to roots[0] when relative, lies inside one of roots. file://
// URIs are read as paths; a leading '~' (which a server may expand to a
// home directory), a NUL byte and a file URI naming a remote host are
// refused.
func insideRoots(roots []string, p string) bool {
	if len(roots) == 0 || strings.ContainsRune(p, 0) {
		return false
	}
	if len(p) >= 5 && strings.EqualFold(p[:5], "file:") {
		u, err := url.Parse(p)
		if err != nil || (u.Host != "" && !strings.EqualFold(u.Host, "localhost")) {
			return false
		}
		p = u.Path
		if p == "" {
			p = u.Opaque
		}
	}
	if strings.HasPrefix(p, "~") {
		return false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(roots[0], p)
	}
	p = filepath.Clean(p)
	for _, r := range roots {
		if within(r, p) {
			return true
		}
	}
	return false
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	root = filepath.Clean(root)
	if p == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(p, root)
}

// Egress checks args against g; nil when every network destination the
// arguments name is allowlisted. What is checked (egress.Find):
//
//   - every string value, and every object key, for URLs of any scheme
//     anywhere in its text (http, ssh, gopher, file://host, ...), special
//     schemes without exactly two slashes, and protocol-relative //host;
//   - every string value, when g.URLArgs is empty, also for scheme-less
//     host:port and host/path words (so "main.go:42" is read as a host;
//     narrow the check with url_args where that is a false positive);
//   - with g.URLArgs, the values under those keys as destinations whole
//     (scheme-less read as http://value, another scheme refused), and
//     the other values for URLs only.
//
// A bare name without port or path ("evil.com") in free text is not a
// destination; under a url_args key it is.
func Egress(g *config.Egress, args map[string]any) *Refusal {
	var rules []egress.Rule
	for _, a := range g.Allow {
		if r, err := egress.ParseRule(a); err == nil { // validated at config load
			rules = append(rules, r)
		}
	}
	keys := keySet(g.URLArgs)
	allowed := func(d egress.Dest) bool {
		if !d.OK {
			return false
		}
		for _, r := range rules {
			if r.Allows(d.Host, d.Port) {
				return true
			}
		}
		return false
	}
	check := func(key, s string, strict, bare bool) *Refusal {
		dests := egress.Find(s, bare)
		if strict {
			if host, port, isURL, ok := egress.Target(s, true); isURL {
				dests = append([]egress.Dest{{Host: host, Port: port, OK: ok}}, dests...)
			}
		}
		for _, d := range dests {
			if allowed(d) {
				continue
			}
			h := receiptHost(d.Host)
			return &Refusal{Code: codes.EgressBlocked, Path: "args", Arg: key, Host: h,
				Reasons: []string{ReasonEgressHostNotAllowed, egress.HostReason(h)},
				Message: fmt.Sprintf("argument %q names a network destination outside this upstream's egress allowlist", key)}
		}
		return nil
	}
	var walk func(key string, v any, under bool, depth int) *Refusal
	walk = func(key string, v any, under bool, depth int) *Refusal {
		if depth > MaxDepth+1 {
			return nil
		}
		switch x := v.(type) {
		case string:
			return check(key, x, under, under || len(keys) == 0)
		case []any:
			for _, c := range x {
				if e := walk(key, c, under, depth+1); e != nil {
					return e
				}
			}
		case map[string]any:
			for k, c := range x {
				if e := check(k, k, false, false); e != nil {
					return e
				}
				if e := walk(k, c, keys[strings.ToLower(k)], depth+1); e != nil {
					return e
				}
			}
		}
		return nil
	}
	return walk("", args, false, 0)
}

// receiptHost maps host into the receipt's reason-code alphabet
// ([A-Za-z0-9_.:-]), any other character as '_', at most 100 characters.
func receiptHost(host string) string {
	if host == "" {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range host {
		if b.Len() >= 100 {
			break
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			c = '_'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// keySet lower-cases keys into a set.
func keySet(keys []string) map[string]bool {
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[strings.ToLower(k)] = true
	}
	return m
}
