package config

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/secretname"
)

// ErrCredential is matched (with errors.Is) by the errors of
// ResolveHeaders and ResolveEnv: a named environment variable or token file
// is missing or unusable. The errors name the variable or file, never a
// value.
var ErrCredential = errors.New("credential unavailable")

// maxTokenFile bounds a bearer_file.
const maxTokenFile = 64 << 10

// normKey lower-cases k and drops '_', '-' and '.' (secretname.Normalize).
func normKey(k string) string { return secretname.Normalize(k) }

// looksSecretKey reports whether a configuration key (or URL query
// parameter) names a secret (secretname.Key).
func looksSecretKey(k string) bool { return secretname.Key(k) }

// looksSecretEnvName reports whether an environment variable name reads
// like a secret (secretname.EnvName).
func looksSecretEnvName(k string) bool { return secretname.EnvName(k) }

// envRef reports whether v is a whole-value reference ${NAME} and returns
// NAME.
func envRef(v string) (string, bool) {
	if len(v) > 3 && strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}") && !strings.ContainsAny(v[2:len(v)-1], "${}") {
		return v[2 : len(v)-1], true
	}
	return "", false
}

// validEnvName reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool { return secretname.ValidEnvName(s) }

// lookup returns the value of the environment variable name, or an error
// that names it (and never shows a value).
func lookup(getenv func(string) (string, bool), upstream, field, name string) (string, error) {
	v, ok := getenv(name)
	switch {
	case !ok:
		return "", fmt.Errorf("upstream %q: %s: environment variable %s is not set: %w", upstream, field, name, ErrCredential)
	case strings.TrimSpace(v) == "":
		return "", fmt.Errorf("upstream %q: %s: environment variable %s is empty: %w", upstream, field, name, ErrCredential)
	case strings.ContainsAny(strings.TrimSpace(v), "\r\n\x00"):
		return "", fmt.Errorf("upstream %q: %s: environment variable %s holds a line break or NUL: %w", upstream, field, name, ErrCredential)
	}
	return strings.TrimSpace(v), nil
}

// ResolveHeaders returns the headers carrying u's credentials, looking the
// named variables up with getenv (os.LookupEnv in production) and reading
// bearer_file: Authorization: Bearer <token> for bearer_env or bearer_file,
// plus one header per headers_env entry. It returns an empty header when u
// has no credentials. An unset or empty variable, or an unreadable or empty
// token file, is an error matching ErrCredential that names the variable or
// file but never includes a value.
func (u *Upstream) ResolveHeaders(getenv func(string) (string, bool)) (http.Header, error) {
	h := http.Header{}
	cr := u.Credentials
	if cr.BearerEnv != "" {
		tok, err := lookup(getenv, u.Name, "credentials.bearer_env", cr.BearerEnv)
		if err != nil {
			return nil, err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	if cr.BearerFile != "" {
		tok, err := readTokenFile(cr.BearerFile)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: credentials.bearer_file %s: %w", u.Name, cr.BearerFile, err)
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	names := make([]string, 0, len(cr.HeadersEnv))
	for k := range cr.HeadersEnv {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, err := lookup(getenv, u.Name, "credentials.headers_env."+k, cr.HeadersEnv[k])
		if err != nil {
			return nil, err
		}
		h.Set(k, v)
	}
	return h, nil
}

// readTokenFile reads a bearer token file: bounded, whitespace trimmed,
// one line.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCredential, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCredential, err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("larger than %d bytes: %w", maxTokenFile, ErrCredential)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("is empty: %w", ErrCredential)
	case strings.ContainsAny(tok, "\r\n\x00"):
		return "", fmt.Errorf("holds more than one line: %w", ErrCredential)
	}
	return tok, nil
}

// ResolveEnv returns u's extra environment as sorted KEY=VALUE entries
// (the form exec.Cmd.Env takes), with every ${NAME} reference replaced by
// the value getenv gives for NAME. An unset reference is an error matching
// ErrCredential that names the variable but not a value.
func (u *Upstream) ResolveEnv(getenv func(string) (string, bool)) ([]string, error) {
	if len(u.Env) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(u.Env))
	for k := range u.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		v := u.Env[k]
		if name, ok := envRef(v); ok {
			val, set := getenv(name)
			if !set {
				return nil, fmt.Errorf("upstream %q: env.%s: environment variable %s is not set: %w", u.Name, k, name, ErrCredential)
			}
			v = val
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// ResolveTokenExchange returns the secrets named by u's token_exchange
// block, looked up with getenv: the client secret, and the gateway subject
// token ("" when gateway_token_env is not set). It returns "", "", nil when
// u has no token_exchange block. An unset or empty variable is an error
// matching ErrCredential that names the variable but never a value.
func (u *Upstream) ResolveTokenExchange(getenv func(string) (string, bool)) (clientSecret, gatewayToken string, err error) {
	te := u.Credentials.TokenExchange
	if te == nil {
		return "", "", nil
	}
	clientSecret, err = lookup(getenv, u.Name, "credentials.token_exchange.client_secret_env", te.ClientSecretEnv)
	if err != nil {
		return "", "", err
	}
	if te.GatewayTokenEnv != "" {
		gatewayToken, err = lookup(getenv, u.Name, "credentials.token_exchange.gateway_token_env", te.GatewayTokenEnv)
		if err != nil {
			return "", "", err
		}
	}
	return clientSecret, gatewayToken, nil
}
