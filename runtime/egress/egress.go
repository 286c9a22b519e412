// Package egress parses network allowlist entries and the destinations of
// URL arguments, for quiver's per-upstream egress guard (spec 001 MUST 7).
// It is shared by configuration validation and the runtime check.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// DefaultPort returns the default port of a scheme the guard understands
// (http, https, ws, wss, ftp) and whether it is one.
func DefaultPort(scheme string) (string, bool) {
	switch scheme {
	case "http", "ws":
		return "80", true
	case "https", "wss":
		return "443", true
	case "ftp":
		return "21", true
	}
	return "", false
}

// Rule is one parsed allowlist entry.
type Rule struct {
	host     string // exact host name, lower case, no trailing dot
	suffix   string // ".example.org" for "*.example.org"
	ip       netip.Addr
	port     string // "" matches any port
	wildcard bool
}

// ParseRule parses one allowlist entry: a host name ("api.example.com"), a
// wildcard suffix ("*.example.org": subdomains only, not the apex) or an IP
// literal, each optionally followed by ":port" (IPv6 in brackets then).
// Without a port any port matches. Host names are ASCII and
// case-insensitive; write an IDN in its xn-- form.
func ParseRule(entry string) (Rule, error) {
	var r Rule
	s := strings.ToLower(strings.TrimSpace(entry))
	if s == "" {
		return r, errors.New("empty entry")
	}
	if strings.ContainsAny(s, "/@?#") {
		return r, errors.New("a host, not a URL")
	}
	if a, err := netip.ParseAddr(s); err == nil { // a bare IPv4 or IPv6 literal
		r.ip = a.Unmap()
		return r, nil
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return r, err
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("invalid port %q", port)
		}
		r.port = strconv.Itoa(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.ip = a.Unmap()
		return r, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard, host = true, rest
	}
	host = strings.TrimSuffix(host, ".")
	if !validHostname(host) {
		return r, fmt.Errorf("%q is not a host name", host)
	}
	if r.wildcard {
		r.suffix = "." + host
	} else {
		r.host = host
	}
	return r, nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port".
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", errors.New("unclosed bracket")
		}
		rest := s[end+1:]
		if rest == "" {
			return s[1:end], "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", errors.New("unexpected text after the bracketed address")
		}
		return s[1:end], rest[1:], nil
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i], s[i+1:], nil
	}
	return s, "", nil
}

// validHostname accepts ASCII DNS names of letters, digits, '-' and '_'.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Allows reports whether the rule admits host (as returned by Target) on
// port. IP rules match IP literals only, by address (IPv4-mapped IPv6 is
// the IPv4 address); host rules compare lower-case names.
func (r Rule) Allows(host, port string) bool {
	if r.port != "" && r.port != port {
		return false
	}
	if r.ip.IsValid() {
		a, err := netip.ParseAddr(host)
		return err == nil && a.Unmap() == r.ip
	}
	if r.wildcard {
		return len(host) > len(r.suffix) && strings.HasSuffix(host, r.suffix)
	}
	return host == r.host
}

// Target extracts the network destination of a string argument.
//
// isURL is false when s is not a destination to check: without strict,
// only values of the form scheme:<non-space>... with a scheme DefaultPort
// knows are; with strict (a key declared to hold URLs) every non-empty
// value is, a scheme-less one read as http://value.
//
// ok is false when the destination cannot be told safely, and the caller
// must refuse it: an unknown scheme under strict, anything but exactly two
// slashes after the scheme, a backslash or whitespace in the authority
// (WHATWG parsers read '\' as '/'), a parse error, or no host.
//
// Tabs and newlines are removed and surrounding control characters and
// spaces trimmed first, as WHATWG URL parsers do. host is lower case
// without brackets or a trailing dot; userinfo is ignored (the host is what
// follows the last '@'); port is explicit or the scheme's default.
func Target(s string, strict bool) (host, port string, isURL, ok bool) {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	scheme, rest, hasScheme := strings.Cut(s, ":")
	scheme = strings.ToLower(scheme)
	if hasScheme && !validScheme(scheme) {
		hasScheme = false
	}
	_, known := DefaultPort(scheme)
	switch {
	case hasScheme && known && rest != "" && rest[0] != ' ':
	case strict && hasScheme && strings.HasPrefix(rest, "//"):
		return "", "", true, false // another scheme under a URL key
	case strict && s != "":
		scheme, rest, s = "http", "//"+s, "http://"+s
	default:
		return "", "", false, false
	}
	if !strings.HasPrefix(rest, "//") || strings.HasPrefix(rest, "///") {
		return "", "", true, false
	}
	authority := rest[2:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if strings.ContainsAny(authority, "\\ ") {
		return "", "", true, false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", "", true, false
	}
	host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", "", true, false
	}
	port = u.Port()
	if port == "" {
		port, _ = DefaultPort(scheme)
	} else if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	}
	return host, port, true, true
}

// validScheme reports whether s is an RFC 3986 scheme.
func validScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
