// Package secretname tells, from a name alone, whether a configuration key
// or an environment variable holds a secret. The configuration loader uses
// it to refuse inline secrets, and the importer of MCP client files uses it
// to move them to environment references: one rule for both.
package secretname

import "strings"

// Normalize lower-cases k and drops '_', '-' and '.', so that api_key, API-KEY and apiKey read alike.
func Normalize(k string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.':
			return -1
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, k)
}

// Key reports whether a configuration key, header name or URL query
// parameter names a secret: token, bearer, password, secret, api_key, ...
func Key(k string) bool {
	n := Normalize(k)
	switch n {
	case "key", "auth", "pat", "pass", "pwd", "credential", "credentials":
		return true
	}
	for _, s := range []string{"token", "bearer", "password", "passwd", "secret", "apikey", "privatekey", "accesskey", "authorization", "cookie"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// EnvName reports whether an environment variable name reads like a
// secret (GITHUB_TOKEN, DB_PASSWORD, OPENAI_API_KEY, ...).
func EnvName(k string) bool {
	parts := strings.FieldsFunc(strings.ToUpper(k), func(r rune) bool { return r == '_' })
	for i, p := range parts {
		switch p {
		case "TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS", "PAT", "BEARER", "COOKIE":
			return true
		case "KEY":
			if i > 0 {
				switch parts[i-1] {
				case "API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "CLIENT":
					return true
				}
			}
		}
	}
	return false
}

// ValidEnvName reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
