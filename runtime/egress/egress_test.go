package egress

import "testing"

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"api.example.com", true},
		{"API.Example.COM.", true},
		{"*.example.org", true},
		{"127.0.0.1", true},
		{"::1", true},
		{"[::1]:8443", true},
		{"api.example.com:443", true},
		{"xn--bcher-kva.example", true},
		{"", false},
		{"*.", false},
		{"*", false},
		{"a.*.example", false},
		{"http://x.example/", false},
		{"user@x.example", false},
		{"x.example:0", false},
		{"x.example:70000", false},
		{"x.example:http", false},
		{"bücher.example", false},
		{"[::1", false},
		{"a..b", false},
	} {
		if _, err := ParseRule(tc.entry); (err == nil) != tc.ok {
			t.Errorf("ParseRule(%q) = %v, want ok %v", tc.entry, err, tc.ok)
		}
	}
}

func TestAllows(t *testing.T) {
	allow := []string{"api.example.com", "*.example.org", "127.0.0.1", "::1", "ports.example:8443", "[2001:db8::1]:443"}
	var rules []Rule
	for _, a := range allow {
		r, err := ParseRule(a)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	allowed := func(s string, strict bool) (bool, bool) {
		host, port, isURL, ok := Target(s, strict)
		if !isURL {
			return false, false
		}
		if !ok {
			return true, false
		}
		for _, r := range rules {
			if r.Allows(host, port) {
				return true, true
			}
		}
		return true, false
	}
	for _, tc := range []struct {
		s             string
		strict        bool
		isURL, admits bool
	}{
		{"https://api.example.com/v1?q=1", false, true, true},
		{"HTTPS://API.EXAMPLE.COM/", false, true, true},
		{"https://api.example.com./x", false, true, true},
		{"https://api.example.com:9999/", false, true, true}, // no port in the entry: any port
		{"wss://a.example.org/socket", false, true, true},
		{"ftp://deep.b.example.org/f", false, true, true},
		{"https://example.org/", false, true, false}, // the apex is not a subdomain
		{"https://evilexample.org/", false, true, false},
		{"https://example.org.evil.com/", false, true, false},
		{"http://127.0.0.1:8080/x", false, true, true},
		{"http://127.0.0.2/", false, true, false},
		{"http://127.1/", false, true, false},      // other spellings of an IP are not the literal
		{"http://2130706433/", false, true, false}, // decimal IPv4
		{"http://[::1]:3000/", false, true, true},
		{"http://[0:0::1]/", false, true, true},
		{"http://[::ffff:127.0.0.1]/", false, true, true},
		{"http://ports.example:8443/", false, true, true},
		{"http://ports.example/", false, true, false},
		{"https://ports.example:443/", false, true, false},
		{"https://[2001:db8::1]/", false, true, true},
		{"http://[2001:db8::1]/", false, true, false},
		// userinfo tricks: the host is what follows the last '@'
		{"http://api.example.com@evil.com/", false, true, false},
		{"http://api.example.com:pw@evil.com/", false, true, false},
		{"http://evil.com@api.example.com/", false, true, true},
		{"http://evil.com\\@api.example.com/", false, true, false}, // WHATWG: host evil.com
		{"http:\\\\evil.com/", false, true, false},
		{"http:evil.com", false, true, false},
		{"http:/evil.com", false, true, false},
		{"http:///evil.com", false, true, false},
		{"h\tttp://evil.com/", false, true, false}, // tabs are removed by WHATWG parsers
		{"  https://evil.com/  ", false, true, false},
		{"http://evil%2ecom/", false, true, false},
		{"http://api%2eexample%2ecom/", false, true, false}, // percent-encoded hosts never match
		// IDN and look-alikes never match an ASCII entry
		{"https://аpi.example.com/", false, true, false}, // Cyrillic a
		{"https://ＡＰＩ.example.com/", false, true, false},
		// not URLs without strict
		{"api.example.com", false, false, false},
		{"evil.com/path", false, false, false},
		{"note: http is text", false, false, false},
		{"mailto:x@evil.com", false, false, false},
		{"file:///etc/passwd", false, false, false},
		// strict (url_args keys)
		{"evil.com/path", true, true, false},
		{"api.example.com/path", true, true, true},
		{"localhost:8080", true, true, false},
		{"file:///etc/passwd", true, true, false},
		{"gopher://api.example.com/", true, true, false},
		{"", true, false, false},
	} {
		isURL, admits := allowed(tc.s, tc.strict)
		if isURL != tc.isURL || admits != tc.admits {
			t.Errorf("%q strict=%v: isURL %v admits %v, want %v %v", tc.s, tc.strict, isURL, admits, tc.isURL, tc.admits)
		}
	}
}
