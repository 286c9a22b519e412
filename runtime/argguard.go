package runtime

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/egress"
)

// Argument guards (spec 001 MUST 7: path/workspace restrictions for file
// tools, network allowlists for egress-sensitive tools). They are
// configured per upstream and check the decoded arguments of every call to
// that upstream's tools before anything is dispatched. They are argument
// checks, not a sandbox: they see what the caller asks for, not what the
// upstream process does. They refuse with PATH_OUTSIDE_WORKSPACE and
// EGRESS_BLOCKED; the receipt's reason codes below say more.
const (
	// ReasonEgressHostNotAllowed is the receipt reason code of an egress
	// refusal; it is followed by EGRESS_HOST:<host>.
	ReasonEgressHostNotAllowed = "EGRESS_HOST_NOT_ALLOWED"
	// ReasonEgressHostPrefix prefixes the blocked host (never the path or
	// query of the URL) in the receipt's reason codes.
	ReasonEgressHostPrefix = "EGRESS_HOST:"
	// ReasonWorkspaceEscape is the receipt reason code of a workspace
	// refusal.
	ReasonWorkspaceEscape = "WORKSPACE_ESCAPE"
)

// argGuardError is a refusal by an argument guard.
type argGuardError struct {
	err   *Error
	codes []string // receipt reason codes after the error code
}

// checkWorkspace checks args against g; nil when every path argument is
// inside a root.
func checkWorkspace(g *config.Workspace, args map[string]any) *argGuardError {
	keys := keySet(g.PathArgs)
	if len(keys) == 0 {
		keys = keySet(config.DefaultPathArgs())
	}
	var walk func(v any, depth int) *argGuardError
	var value func(key string, v any, depth int) *argGuardError
	value = func(key string, v any, depth int) *argGuardError {
		if depth > maxArgsDepth+1 {
			return nil // preflight bounds the depth
		}
		switch x := v.(type) {
		case string:
			if !insideRoots(g.Roots, x) {
				return &argGuardError{
					err: newError(CodePathOutsideWorkspace, "argument %q names a path outside this upstream's workspace", key).
						withPath("args").withDetail("arg", key).withDetail("reason_codes", []string{ReasonWorkspaceEscape}),
					codes: []string{ReasonWorkspaceEscape},
				}
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
	walk = func(v any, depth int) *argGuardError {
		if depth > maxArgsDepth+1 {
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

// checkEgress checks args against g; nil when every URL argument names an
// allowlisted host.
func checkEgress(g *config.Egress, args map[string]any) *argGuardError {
	var rules []egress.Rule
	for _, a := range g.Allow {
		if r, err := egress.ParseRule(a); err == nil { // validated at config load
			rules = append(rules, r)
		}
	}
	keys := keySet(g.URLArgs)
	check := func(key, s string, strict bool) *argGuardError {
		host, port, isURL, ok := egress.Target(s, strict)
		if !isURL {
			return nil
		}
		if ok {
			for _, r := range rules {
				if r.Allows(host, port) {
					return nil
				}
			}
		}
		codes := []string{ReasonEgressHostNotAllowed, ReasonEgressHostPrefix + receiptHost(host)}
		e := newError(CodeEgressBlocked, "argument %q names a network destination outside this upstream's egress allowlist", key).
			withPath("args").withDetail("arg", key).withDetail("host", receiptHost(host)).withDetail("reason_codes", codes)
		return &argGuardError{err: e, codes: codes}
	}
	var walk func(key string, v any, under bool, depth int) *argGuardError
	walk = func(key string, v any, under bool, depth int) *argGuardError {
		if depth > maxArgsDepth+1 {
			return nil
		}
		switch x := v.(type) {
		case string:
			if len(keys) == 0 || under {
				return check(key, x, under)
			}
		case []any:
			for _, c := range x {
				if e := walk(key, c, under, depth+1); e != nil {
					return e
				}
			}
		case map[string]any:
			for k, c := range x {
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

// argGuardsOf returns the guards configured for the upstream serving
// server (nil when none).
func (r *Runtime) argGuardsOf(st *state, server string) (*config.Workspace, *config.Egress) {
	if e := st.owner[server]; e != nil {
		return e.workspace, e.egress
	}
	return nil, nil
}

// checkArgGuards runs the workspace and egress guards of the call's
// upstream, recording them as the dry-run checks "workspace" and "egress"
// when configured. A refusal notes its reason codes for the receipt.
func (r *Runtime) checkArgGuards(ctx context.Context, st *state, server string, args map[string]any, v *verdicts) *Error {
	ws, eg := r.argGuardsOf(st, server)
	run := func(name string, g *argGuardError) *Error {
		var e *Error
		if g != nil {
			e = g.err
			if c := callerOf(ctx); c != nil && !v.dry {
				c.reasons = append(c.reasons, g.codes...)
			}
		}
		return v.record(name, false, e)
	}
	if ws != nil {
		if e := run("workspace", checkWorkspace(ws, args)); e != nil {
			return e
		}
	}
	if eg != nil {
		if e := run("egress", checkEgress(eg, args)); e != nil {
			return e
		}
	}
	return nil
}
