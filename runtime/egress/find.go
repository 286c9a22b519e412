package egress

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// Dest is one network destination named in a string.
type Dest struct {
	// Host is lower case, without brackets or a trailing dot; "" when OK
	// is false and no host could be told.
	Host string
	// Port is explicit, else the scheme's default, else "".
	Port string
	// OK is false when the destination cannot be told safely (a
	// malformed authority a URL parser may read another way): the caller
	// refuses it.
	OK bool
}

// MaxDests bounds the destinations Find returns for one string; a string
// naming more is reported with one more Dest that is not OK, so a caller
// refuses it rather than checking a prefix.
const MaxDests = 64

// schemePorts are the default ports of schemes the guard names besides
// the WHATWG special ones; any other scheme has no default port, so only
// an allowlist entry without a port admits it.
var schemePorts = map[string]string{
	"ssh": "22", "sftp": "22", "scp": "22", "git": "9418", "gopher": "70", "telnet": "23",
	"ldap": "389", "ldaps": "636", "smb": "445", "rsync": "873", "redis": "6379", "mysql": "3306",
	"postgres": "5432", "postgresql": "5432", "mongodb": "27017", "irc": "6667", "nntp": "119",
	"tftp": "69", "dict": "2628", "ws+unix": "",
}

// Find returns the network destinations that the free text s names:
//
//   - every scheme://authority anywhere in s, of any scheme (http, ssh,
//     gopher, ...; file:// only with a host other than localhost);
//   - a WHATWG special scheme (http, https, ws, wss, ftp) followed by
//     anything but exactly two slashes ("http:/h", "http:h",
//     "http:\\h"), as not OK;
//   - a protocol-relative //host at the start of a word;
//   - with bare, a scheme-less word of the form host:port, host/path,
//     host:port/path or user@host:path, where host is an IP literal,
//     localhost, or a dotted name whose last label is letters (so
//     "src/main.go" and "v1.2/x" are not hosts, but "evil.com/x" and
//     "main.go:42" are).
//
// Besides the words of s, the whole of s is read as a WHATWG URL parser
// reads it (tabs and newlines removed, control characters and spaces
// trimmed), so a value an upstream parses as one URL is judged by the
// host that parser sees. A bare host name with neither port nor path
// ("evil.com") is not a destination here: it is under a URL key (Target
// with strict). Hosts are not percent-decoded: an encoded host never
// matches an allowlist entry.
func Find(s string, bare bool) []Dest {
	f := finder{bare: bare}
	whole := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	whole = strings.TrimFunc(whole, func(r rune) bool { return r <= ' ' })
	if scheme, _, ok := strings.Cut(whole, ":"); (ok && validScheme(strings.ToLower(scheme))) || strings.HasPrefix(whole, "//") {
		f.word(whole) // a value an upstream may parse as one URL
	}
	for _, w := range strings.FieldsFunc(s, wordBreak) {
		f.word(w)
	}
	return f.out
}

// wordBreak separates the words of free text: white space and the quotes
// and brackets that surround a URL in prose, Markdown and JSON.
func wordBreak(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune("\"'`<>(){}|^,;", r) || r == 0
}

type finder struct {
	bare bool
	out  []Dest
	seen map[Dest]bool
}

func (f *finder) add(d Dest) {
	if len(f.out) > MaxDests {
		return
	}
	if f.seen == nil {
		f.seen = map[Dest]bool{}
	}
	if f.seen[d] {
		return
	}
	f.seen[d] = true
	if len(f.out) == MaxDests {
		d = Dest{}
	}
	f.out = append(f.out, d)
}

// word finds the destinations in one word.
func (f *finder) word(w string) {
	if w == "" {
		return
	}
	// WHATWG parsers read '\' as '/' after a special scheme.
	w = strings.ReplaceAll(w, "\\", "/")
	found := false
	for i := 0; i+2 < len(w); {
		j := strings.Index(w[i:], "://")
		if j < 0 {
			break
		}
		j += i
		if scheme := schemeBefore(w, j); scheme != "" {
			f.authority(scheme, w[j+3:])
			found = true
		}
		i = j + 3
	}
	if f.special(w) {
		found = true
	}
	trimmed := strings.TrimLeft(w, "[{(*.,;:!?=")
	if strings.HasPrefix(trimmed, "//") && !strings.HasPrefix(w, "://") && !found {
		rest := strings.TrimLeft(trimmed, "/")
		switch {
		case rest == "" || rest[0] == ' ':
		case len(trimmed)-len(rest) != 2:
			f.add(Dest{}) // "///host": a parser may read host
		default:
			f.authority("", rest)
		}
		return
	}
	if f.bare && !found {
		f.scpOrBare(w)
	}
}

// schemeBefore returns the scheme that ends at w[j] ("" when none): the
// longest run of scheme characters before j, from its first letter.
func schemeBefore(w string, j int) string {
	i := j
	for i > 0 {
		c := w[i-1]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.' {
			i--
			continue
		}
		break
	}
	for i < j && !(w[i] >= 'a' && w[i] <= 'z' || w[i] >= 'A' && w[i] <= 'Z') {
		i++
	}
	return strings.ToLower(w[i:j])
}

// special adds a special scheme followed by other than exactly "//" (as
// not OK); it reports whether it found one.
func (f *finder) special(w string) bool {
	lw := strings.ToLower(w)
	found := false
	for _, s := range [...]string{"http:", "https:", "ws:", "wss:", "ftp:"} {
		for i := 0; ; {
			j := strings.Index(lw[i:], s)
			if j < 0 {
				break
			}
			j += i
			i = j + len(s)
			if j > 0 && isSchemeChar(lw[j-1]) {
				continue // part of a longer scheme or word
			}
			rest := lw[j+len(s):]
			if rest == "" {
				continue
			}
			found = true
			if !strings.HasPrefix(rest, "//") || strings.HasPrefix(rest, "///") {
				f.add(Dest{})
			}
		}
	}
	return found
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// authority adds the destination of the authority that starts rest.
func (f *finder) authority(scheme, rest string) {
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	host, port, ok := hostPort(rest)
	if scheme == "file" && (host == "" || host == "localhost") && ok {
		return // a local path: the workspace guard's concern
	}
	if !ok || host == "" {
		f.add(Dest{Host: host})
		return
	}
	if port == "" {
		if p, known := DefaultPort(scheme); known {
			port = p
		} else {
			port = schemePorts[scheme]
		}
	}
	f.add(Dest{Host: host, Port: port, OK: true})
}

// hostPort splits "host", "host:port", "[v6]" or "[v6]:port", lower-cases
// the host and drops its trailing dot; ok is false for a malformed port
// or characters no host has.
func hostPort(s string) (host, port string, ok bool) {
	h, p, err := splitHostPort(s)
	if err != nil {
		return "", "", false
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("[]<>^|\"", r) }) {
		return h, "", false
	}
	if strings.HasPrefix(s, "[") {
		if _, err := netip.ParseAddr(h); err != nil {
			return h, "", false
		}
	}
	if p != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return h, "", false
		}
		p = strconv.Itoa(n)
	}
	return h, p, true
}

// scpOrBare adds a scheme-less destination: host:port, host/path,
// host:port/path, or user@host:path.
func (f *finder) scpOrBare(w string) {
	w = strings.Map(func(r rune) rune {
		if r == '\u3002' || r == '\uff0e' || r == '\uff61' { // IDNA dots
			return '.'
		}
		return r
	}, w)
	w = strings.TrimRight(w, ".,;:!?")
	w = strings.TrimLeft(w, "*=")
	end := strings.IndexAny(w, "/?#")
	auth, path := w, ""
	if end >= 0 {
		auth, path = w[:end], w[end:]
	}
	user := false
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth, user = auth[i+1:], true
	}
	var host, port string
	if strings.HasPrefix(auth, "[") {
		h, p, ok := hostPort(auth)
		if !ok {
			return
		}
		host, port = h, p
	} else if i := strings.IndexByte(auth, ':'); i >= 0 {
		host, port = auth[:i], auth[i+1:]
		if n, err := strconv.Atoi(port); err == nil && n >= 0 && n <= 65535 && port != "" {
			port = strconv.Itoa(n)
		} else if user {
			port = "22" // user@host:path, the scp form
		} else {
			return
		}
	} else {
		host = auth
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if port == "" && path == "" {
		return // a bare name or user@host: not a destination in free text
	}
	if !bareHost(host) {
		return
	}
	f.add(Dest{Host: host, Port: port, OK: true})
}

// bareHost reports whether h, met without a scheme, reads as a host: an
// IP literal, localhost, or a dotted name of letters, digits, '-' and '_'
// whose last label has two or more letters and nothing else.
func bareHost(h string) bool {
	if h == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" {
			return false
		}
		for _, r := range l {
			if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_') {
				return false
			}
		}
	}
	tld := labels[len(labels)-1]
	n := 0
	for _, r := range tld {
		if !unicode.IsLetter(r) {
			return false
		}
		n++
	}
	return n >= 2
}
