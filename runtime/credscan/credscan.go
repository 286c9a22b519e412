// Package credscan finds credentials in the arguments of a tool call, so
// that quiver can refuse to pass them upstream (spec 001 MUST 5: upstream
// credentials come only from the upstream's own configuration).
//
// Two kinds of evidence count. A credential-named key (authorization,
// api_key, cookie, aws_secret_access_key, ...) holding a value of a
// credential's shape; and, in any string value at any depth, a shape that
// is a credential whatever its key: a PEM private key, an AWS access key
// id, GitHub, GitLab, Slack, Google and Stripe token prefixes, a JWT, an
// "Authorization:" or "Cookie:" header line, "Bearer <token>", an
// aws_secret_access_key assignment, and the caller's own bearer token,
// compared by sha256 so that the scanner never holds it.
//
// Passwords are not refused by key (tools legitimately set them), nor
// are opaque high-entropy strings without a known prefix: the false
// positives would refuse hashes, ids and content.
package credscan

import (
	"crypto/sha256"
	"crypto/subtle"
	"regexp"
	"strings"
)

// Kinds of credential, as reported in Finding.Kind (and receipted).
const (
	KindKeyed         = "KEYED"           // a credential-named key with a token-shaped value
	KindCookie        = "COOKIE"          // a cookie or set-cookie value
	KindPrivateKey    = "PEM_PRIVATE_KEY" // -----BEGIN ... PRIVATE KEY-----
	KindAWS           = "AWS_KEY"         // an access key id or a secret access key
	KindProviderToken = "PROVIDER_TOKEN"  // GitHub, GitLab, Slack, Google, Stripe prefixes
	KindJWT           = "JWT"             // a signed JWT
	KindHeader        = "AUTH_HEADER"     // an Authorization: or Cookie: header, Bearer <token>
	KindCallerToken   = "CALLER_TOKEN"    // the caller's own bearer token
)

// MaxDepth bounds how deep Scan looks; the argument guard's preflight
// bounds nesting tighter before Scan runs.
const MaxDepth = 64

// Finding is one credential Scan found: its kind and the key it sits
// under (never the value).
type Finding struct {
	Kind string
	Key  string
}

// Scanner finds credentials; the zero value knows no caller token.
type Scanner struct {
	caller [sha256.Size]byte
	has    bool
}

// WithCaller returns a scanner that also finds the token whose sha256 is
// sum (the caller's verified bearer token).
func WithCaller(sum [sha256.Size]byte) *Scanner {
	return &Scanner{caller: sum, has: true}
}

// keyNames are credential-named keys, lower case without '_', '-' or
// spaces.
var keyNames = map[string]bool{
	"authorization": true, "proxyauthorization": true, "accesstoken": true, "bearer": true, "bearertoken": true,
	"apikey": true, "idtoken": true, "refreshtoken": true, "token": true, "authtoken": true, "clientsecret": true,
	"xapikey": true, "xauthtoken": true, "sessiontoken": true, "awssessiontoken": true, "awssecretaccesskey": true,
	"secretaccesskey": true, "awsaccesskeyid": true, "privatekey": true, "secretkey": true,
}

// cookieNames hold cookies; their values are refused when they carry a
// name=value pair with a value long enough to be a session.
var cookieNames = map[string]bool{"cookie": true, "cookies": true, "setcookie": true}

var (
	tokenShape  = regexp.MustCompile(`^(?i:(?:bearer|basic|token)\s+)?[A-Za-z0-9._~+/=-]{16,}$`)
	cookieShape = regexp.MustCompile(`(?:^|[;\s])[^=;\s]+=[^;\s]{8,}`)
	// shapes find a credential anywhere in a string; each is anchored on
	// a prefix or a delimiter so that ordinary text does not match.
	shapes = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{KindPrivateKey, regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
		{KindAWS, regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[A-Z2-7]{16}\b`)},
		{KindAWS, regexp.MustCompile(`(?i)\baws_?secret_?access_?key\b["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{30,}`)},
		{KindProviderToken, regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}|[sr]k_live_[0-9A-Za-z]{16,})`)},
		{KindJWT, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`)},
		{KindHeader, regexp.MustCompile(`(?i)\b(?:proxy-)?authorization\s*:\s*(?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+\S{8,}`)},
		{KindHeader, regexp.MustCompile(`(?i)\b(?:set-)?cookie\s*:\s*[^=;\s]+=[^;\s]{8,}`)},
		{KindHeader, regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}=*`)},
	}
	// words are the candidates compared with the caller's token: runs of
	// token characters, with and without the base64 ones.
	words = []*regexp.Regexp{regexp.MustCompile(`[A-Za-z0-9._~+/=-]{16,}`), regexp.MustCompile(`[A-Za-z0-9._~-]{16,}`)}
)

// Scan returns the first credential in v (decoded JSON), or nil.
func (s *Scanner) Scan(v any) *Finding {
	return s.walk("", v, 0)
}

func (s *Scanner) walk(key string, v any, depth int) *Finding {
	if depth > MaxDepth {
		return nil
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if f := s.keyed(k, x); f != nil {
				return f
			}
			if f := s.walk(k, x, depth+1); f != nil {
				return f
			}
		}
	case []any:
		for _, x := range t {
			if f := s.walk(key, x, depth+1); f != nil {
				return f
			}
		}
	case string:
		return s.text(key, t)
	}
	return nil
}

// normKey lower-cases k and drops '_', '-', '.' and spaces.
func normKey(k string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ', '.':
			return -1
		}
		return r
	}, strings.ToLower(k))
}

// keyed judges a value by its key.
func (s *Scanner) keyed(k string, x any) *Finding {
	v, ok := x.(string)
	if !ok {
		return nil
	}
	n := normKey(k)
	v = strings.TrimSpace(v)
	switch {
	case keyNames[n] && tokenShape.MatchString(v):
		return &Finding{Kind: KindKeyed, Key: k}
	case cookieNames[n] && cookieShape.MatchString(v):
		return &Finding{Kind: KindCookie, Key: k}
	}
	return nil
}

// text judges a string by its content.
func (s *Scanner) text(key, v string) *Finding {
	for _, sh := range shapes {
		if sh.re.MatchString(v) {
			return &Finding{Kind: sh.kind, Key: key}
		}
	}
	if s != nil && s.has {
		// The caller's token may sit anywhere in the text: compare the
		// digest of the whole value and of each token-shaped word.
		if s.is(strings.TrimSpace(v)) {
			return &Finding{Kind: KindCallerToken, Key: key}
		}
		for _, re := range words {
			for _, w := range re.FindAllString(v, -1) {
				if s.is(w) {
					return &Finding{Kind: KindCallerToken, Key: key}
				}
			}
		}
	}
	return nil
}

func (s *Scanner) is(w string) bool {
	sum := sha256.Sum256([]byte(w))
	return subtle.ConstantTimeCompare(sum[:], s.caller[:]) == 1
}
