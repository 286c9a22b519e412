package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/egress"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/toolid"
)

// The raw* types mirror the schema with pointers, so that absent keys can
// take their defaults. They are filled from a value the schema accepted.
type rawConfig struct {
	Mode         *string                 `json:"mode"`
	Environment  *string                 `json:"environment"`
	Listen       *rawListen              `json:"listen"`
	StateDir     *string                 `json:"state_dir"`
	Upstreams    []rawUpstream           `json:"upstreams"`
	Registry     []string                `json:"registry"`
	Browse       *rawBrowse              `json:"browse"`
	Firewall     *rawFirewall            `json:"firewall"`
	Artifacts    *rawArtifacts           `json:"artifacts"`
	Retry        *rawRetry               `json:"retry"`
	Cache        *rawCache               `json:"cache"`
	RateLimits   map[string]rawRateLimit `json:"rate_limits"`
	Expose       *rawExpose              `json:"expose"`
	Schema       *rawSchema              `json:"schema"`
	TolerantArgs *bool                   `json:"tolerant_args"`
	Principals   map[string]rawPrincipal `json:"principals"`
	Auth         *rawAuth                `json:"auth"`
	Policy       *rawPolicy              `json:"policy"`
	Approvals    *rawApprovals           `json:"approvals"`
	Receipts     *rawReceipts            `json:"receipts"`
	Incident     *rawIncident            `json:"incident"`
	Admin        *rawAdmin               `json:"admin"`
	Log          *rawLog                 `json:"log"`
}

type rawAuth struct {
	Realm         *string               `json:"realm"`
	MaxTokenBytes *int                  `json:"max_token_bytes"`
	Issuers       []rawIssuer           `json:"issuers"`
	Local         *identity.LocalConfig `json:"local"`
}

type rawIssuer struct {
	Name             string              `json:"name"`
	Issuer           string              `json:"iss"`
	Audiences        []string            `json:"audiences"`
	Alg              string              `json:"alg"`
	HS256SecretEnv   string              `json:"hs256_secret_env"`
	JWKSFile         string              `json:"jwks_file"`
	JWKSURL          string              `json:"jwks_url"`
	JWKSRefresh      *string             `json:"jwks_refresh"`
	ClockSkew        *string             `json:"clock_skew"`
	Claims           identity.ClaimNames `json:"claims"`
	DefaultActorType string              `json:"default_actor_type"`
}

type rawPolicy struct {
	File          string  `json:"file"`
	WatchInterval *string `json:"watch_interval"`
}

type rawApprovals struct {
	TTL        *string `json:"ttl"`
	MaxPending *int    `json:"max_pending"`
}

type rawReceipts struct {
	Stdout *bool `json:"stdout"`
}

type rawIncident struct {
	Persist *bool `json:"persist"`
}

type rawAdmin struct {
	TokenEnv *string     `json:"token_env"`
	Claim    *AdminClaim `json:"claim"`
}

type rawPrincipal struct {
	ReadOnly *bool `json:"read_only"`
}

type rawListen struct {
	Transport      *string  `json:"transport"`
	Addr           *string  `json:"addr"`
	Path           *string  `json:"path"`
	TLS            *rawTLS  `json:"tls"`
	AllowedHosts   []string `json:"allowed_hosts"`
	AllowedOrigins []string `json:"allowed_origins"`
	// SessionIdleTimeout closes HTTP sessions idle this long.
	SessionIdleTimeout *string `json:"session_idle_timeout"`
}

type rawTLS struct {
	Cert *string `json:"cert"`
	Key  *string `json:"key"`
}

type rawUpstream struct {
	Name           string            `json:"name"`
	Command        []string          `json:"command"`
	URL            *string           `json:"url"`
	SSE            *string           `json:"sse"`
	Catalog        *string           `json:"catalog"`
	Env            map[string]string `json:"env"`
	Dir            *string           `json:"dir"`
	TrustLevel     *string           `json:"trust_level"`
	Risk           *string           `json:"risk"`
	Credentials    *rawCredentials   `json:"credentials"`
	ConnectTimeout *string           `json:"connect_timeout"`
	CallTimeout    *string           `json:"call_timeout"`
	ToolPrefix     *string           `json:"tool_prefix"`
	Sessions       *string           `json:"sessions"`
	Enabled        *bool             `json:"enabled"`
	Workspace      *rawWorkspace     `json:"workspace"`
	Egress         *rawEgress        `json:"egress"`
}

type rawWorkspace struct {
	Roots    []string `json:"roots"`
	PathArgs []string `json:"path_args"`
}

type rawEgress struct {
	Allow   []string `json:"allow"`
	URLArgs []string `json:"url_args"`
}

type rawCredentials struct {
	BearerEnv     *string           `json:"bearer_env"`
	BearerFile    *string           `json:"bearer_file"`
	HeadersEnv    map[string]string `json:"headers_env"`
	TokenExchange *rawTokenExchange `json:"token_exchange"`
}

type rawTokenExchange struct {
	TokenURL         *string `json:"token_url"`
	ClientID         *string `json:"client_id"`
	ClientSecretEnv  *string `json:"client_secret_env"`
	Audience         *string `json:"audience"`
	Scope            *string `json:"scope"`
	Subject          *string `json:"subject"`
	SubjectTokenType *string `json:"subject_token_type"`
	GatewayTokenEnv  *string `json:"gateway_token_env"`
}

type rawBrowse struct {
	TopK        *int  `json:"top_k"`
	CacheStable *bool `json:"cache_stable"`
	MaxChildren *int  `json:"max_children"`
}

type rawFirewall struct {
	MaxInlineTokens *int     `json:"max_inline_tokens"`
	Enabled         *bool    `json:"enabled"`
	OffFor          []string `json:"off_for"`
}

type rawArtifacts struct {
	TTL      *string `json:"ttl"`
	MaxBytes any     `json:"max_bytes"`
}

type rawRetry struct {
	MaxAttempts    *int     `json:"max_attempts"`
	BaseDelay      *string  `json:"base_delay"`
	MaxDelay       *string  `json:"max_delay"`
	Jitter         *bool    `json:"jitter"`
	RetryableCodes []string `json:"retryable_codes"`
}

type rawCache struct {
	ReadOnly   *bool    `json:"read_only"`
	TTL        *string  `json:"ttl"`
	MaxEntries *int     `json:"max_entries"`
	Allow      []string `json:"allow"`
}

type rawRateLimit struct {
	MaxCallsPerMinute  int `json:"max_calls_per_minute"`
	MaxCallsPerSession int `json:"max_calls_per_session"`
}

type rawExpose struct {
	Direct []string `json:"direct"`
}

type rawSchema struct {
	Strict        *bool `json:"strict"`
	MaxBytes      any   `json:"max_bytes"`
	MaxDepth      *int  `json:"max_depth"`
	MaxProperties *int  `json:"max_properties"`
}

type rawLog struct {
	Level  *string `json:"level"`
	Format *string `json:"format"`
}

// checker collects the semantic problems of one file.
type checker struct {
	t       *tree
	baseDir string
	errs    []*Error
}

// fail records a problem with the value at ptr.
func (c *checker) fail(ptr, format string, args ...any) {
	c.errs = append(c.errs, c.t.errAt(ptr, format, args...))
}

// build turns a schema-valid tree into a Config, applying defaults,
// resolving paths and checking what the schema cannot.
func build(t *tree, baseDir string) (*Config, error) {
	js, err := json.Marshal(t.value)
	if err != nil {
		return nil, &Error{File: t.file, Msg: oneLine(err.Error()), Err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var raw rawConfig
	if err := dec.Decode(&raw); err != nil {
		// The schema admits only what rawConfig can hold; an error here is a
		// schema/struct mismatch, reported without a position.
		return nil, &Error{File: t.file, Msg: "cannot decode: " + oneLine(err.Error()), Err: err}
	}
	c := &checker{t: t, baseDir: baseDir}
	cfg := Default()
	cfg.Source = t.file
	cfg.Dir = baseDir

	setString((*string)(&cfg.Mode), raw.Mode)
	setString((*string)(&cfg.Environment), raw.Environment)
	c.listen(&cfg.Listen, raw.Listen)
	cfg.StateDir = c.stateDir(raw.StateDir)
	c.upstreams(cfg, raw.Upstreams)
	for i, g := range raw.Registry {
		ptr := "/registry/" + strconv.Itoa(i)
		p := c.path(ptr, g)
		if _, err := filepath.Match(p, ""); err != nil {
			c.fail(ptr, "is not a valid glob: %v", err)
		}
		cfg.Registry = append(cfg.Registry, p)
	}
	if b := raw.Browse; b != nil {
		setInt(&cfg.Browse.TopK, b.TopK)
		setBool(&cfg.Browse.CacheStable, b.CacheStable)
		setInt(&cfg.Browse.MaxChildren, b.MaxChildren)
	}
	if f := raw.Firewall; f != nil {
		setInt(&cfg.Firewall.MaxInlineTokens, f.MaxInlineTokens)
		setBool(&cfg.Firewall.Enabled, f.Enabled)
		cfg.Firewall.OffFor = c.toolGlobs("/firewall/off_for", f.OffFor)
	}
	if a := raw.Artifacts; a != nil {
		c.duration("/artifacts/ttl", a.TTL, &cfg.Artifacts.TTL, true)
		c.size("/artifacts/max_bytes", a.MaxBytes, &cfg.Artifacts.MaxBytes)
	}
	if r := raw.Retry; r != nil {
		setInt(&cfg.Retry.MaxAttempts, r.MaxAttempts)
		c.duration("/retry/base_delay", r.BaseDelay, &cfg.Retry.BaseDelay, false)
		c.duration("/retry/max_delay", r.MaxDelay, &cfg.Retry.MaxDelay, false)
		setBool(&cfg.Retry.Jitter, r.Jitter)
		if r.RetryableCodes != nil {
			cfg.Retry.RetryableCodes = nonEmpty(r.RetryableCodes)
		}
		if cfg.Retry.MaxDelay < cfg.Retry.BaseDelay {
			ptr := "/retry/max_delay"
			if r.MaxDelay == nil {
				ptr = "/retry/base_delay"
			}
			c.fail(ptr, "max_delay (%s) must be at least base_delay (%s)",
				FormatDuration(cfg.Retry.MaxDelay), FormatDuration(cfg.Retry.BaseDelay))
		}
	}
	if ca := raw.Cache; ca != nil {
		setBool(&cfg.Cache.ReadOnly, ca.ReadOnly)
		c.duration("/cache/ttl", ca.TTL, &cfg.Cache.TTL, true)
		setInt(&cfg.Cache.MaxEntries, ca.MaxEntries)
		cfg.Cache.Allow = c.toolGlobs("/cache/allow", ca.Allow)
	}
	if len(raw.RateLimits) > 0 {
		cfg.RateLimits = make(map[string]RateLimit, len(raw.RateLimits))
		for scope, rl := range raw.RateLimits {
			if g, ok := strings.CutPrefix(scope, "tool:"); ok {
				if _, err := path.Match(g, ""); err != nil {
					c.fail("/rate_limits/"+escapeToken(scope), "is not a valid tool_id glob: %v", err)
				}
			}
			cfg.RateLimits[scope] = RateLimit(rl)
		}
	}
	if e := raw.Expose; e != nil {
		cfg.Expose.Direct = c.toolGlobs("/expose/direct", e.Direct)
	}
	if s := raw.Schema; s != nil {
		setBool(&cfg.Schema.Strict, s.Strict)
		c.size("/schema/max_bytes", s.MaxBytes, &cfg.Schema.MaxBytes)
		setInt(&cfg.Schema.MaxDepth, s.MaxDepth)
		setInt(&cfg.Schema.MaxProperties, s.MaxProperties)
	}
	setBool(&cfg.TolerantArgs, raw.TolerantArgs)
	if len(raw.Principals) > 0 {
		cfg.Principals = make(map[string]Principal, len(raw.Principals))
		for name, p := range raw.Principals {
			var pr Principal
			setBool(&pr.ReadOnly, p.ReadOnly)
			cfg.Principals[name] = pr
		}
	}
	c.safety(cfg, &raw)
	if l := raw.Log; l != nil {
		setString(&cfg.Log.Level, l.Level)
		setString(&cfg.Log.Format, l.Format)
	}
	if len(c.errs) > 0 {
		return nil, earliest(c.errs)
	}
	return cfg, nil
}

func setString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func setBool(dst *bool, v *bool) {
	if v != nil {
		*dst = *v
	}
}

// nonEmpty returns s, or nil when s is empty.
func nonEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// duration parses the duration at ptr into dst (when present).
func (c *checker) duration(ptr string, v *string, dst *time.Duration, positive bool) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		c.fail(ptr, "is not a valid duration (too large?)")
	case d < 0:
		c.fail(ptr, "must not be negative")
	case positive && d == 0:
		c.fail(ptr, "must be greater than 0")
	default:
		*dst = d
	}
}

// size parses the size at ptr into dst (when present); sizes are positive.
func (c *checker) size(ptr string, v any, dst *int64) {
	if v == nil {
		return
	}
	n, err := parseSizeValue(v)
	switch {
	case err != nil:
		c.fail(ptr, "%v", err)
	case n <= 0:
		c.fail(ptr, "must be at least 1 byte")
	default:
		*dst = n
	}
}

// path resolves a path against the configuration's directory. Only
// state_dir expands '~'; elsewhere it is refused rather than taken as a
// directory named "~".
func (c *checker) path(ptr, p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		c.fail(ptr, "'~' is expanded only in state_dir; write an absolute path or one relative to the configuration file")
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.baseDir, p)
}

// toolGlobs checks tool_id globs (path.Match syntax).
func (c *checker) toolGlobs(ptr string, globs []string) []string {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			c.fail(ptr+"/"+strconv.Itoa(i), "is not a valid glob: %v", err)
		}
	}
	return nonEmpty(globs)
}

// stateDir places the state directory: '~' and $XDG_STATE_HOME are
// expanded, relative paths are relative to the configuration's directory.
func (c *checker) stateDir(v *string) string {
	if v == nil {
		sd, err := defaultStateDir()
		if err != nil {
			l := c.t.locs[""]
			c.errs = append(c.errs, &Error{File: c.t.file, Line: l.line, Column: l.col, Field: "state_dir",
				Msg: fmt.Sprintf("cannot place the default (%v); set state_dir", err)})
		}
		return sd
	}
	const ptr = "/state_dir"
	p := *v
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			c.fail(ptr, "cannot expand '~': %v", err)
			return ""
		}
		p = filepath.Join(home, p[1:])
	case strings.HasPrefix(p, "~"):
		c.fail(ptr, "'~user' is not supported; write the path out")
		return ""
	default:
		for _, pre := range []string{"$XDG_STATE_HOME", "${XDG_STATE_HOME}"} {
			rest, ok := strings.CutPrefix(p, pre)
			if !ok || (rest != "" && rest[0] != '/' && rest[0] != filepath.Separator) {
				continue
			}
			base := os.Getenv("XDG_STATE_HOME")
			if !filepath.IsAbs(base) {
				// The XDG default when the variable is unset or not absolute.
				home, err := os.UserHomeDir()
				if err != nil {
					c.fail(ptr, "cannot expand $XDG_STATE_HOME: it is unset and %v", err)
					return ""
				}
				base = filepath.Join(home, ".local", "state")
			}
			p = filepath.Join(base, rest)
			break
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.baseDir, p)
	}
	return filepath.Clean(p)
}

// listen fills l from r.
func (c *checker) listen(l *Listen, r *rawListen) {
	if r == nil {
		return
	}
	setString((*string)(&l.Transport), r.Transport)
	setString(&l.Addr, r.Addr)
	setString(&l.Path, r.Path)
	if r.Addr != nil {
		host, port, err := net.SplitHostPort(*r.Addr)
		if err != nil {
			c.fail("/listen/addr", "must be host:port, e.g. 127.0.0.1:8080")
		} else if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			c.fail("/listen/addr", "must be host:port with a port number 0..65535")
		}
	}
	if r.TLS != nil {
		switch {
		case r.TLS.Cert == nil && r.TLS.Key == nil:
			c.fail("/listen/tls", "needs both cert and key")
		case r.TLS.Cert == nil:
			c.fail("/listen/tls", "needs cert as well as key")
		case r.TLS.Key == nil:
			c.fail("/listen/tls", "needs key as well as cert")
		default:
			l.TLS = &TLS{Cert: c.path("/listen/tls/cert", *r.TLS.Cert), Key: c.path("/listen/tls/key", *r.TLS.Key)}
		}
		if l.Transport != TransportHTTP {
			c.fail("/listen/tls", "is only valid with transport http")
		}
	}
	l.AllowedHosts = nonEmpty(r.AllowedHosts)
	l.AllowedOrigins = nonEmpty(r.AllowedOrigins)
	c.duration("/listen/session_idle_timeout", r.SessionIdleTimeout, &l.SessionIdleTimeout, false)
}

// upstreams fills cfg.Upstreams from rs.
func (c *checker) upstreams(cfg *Config, rs []rawUpstream) {
	type first struct {
		name string
		line int
	}
	names := map[string]int{}
	spaces := map[string]first{}
	for i := range rs {
		r := &rs[i]
		ptr := "/upstreams/" + strconv.Itoa(i)
		u := defaultUpstream(r.Name)
		line := c.t.locs[ptr+"/name"].kline

		switch ns := toolid.Namespace(r.Name); {
		case strings.TrimSpace(r.Name) != r.Name:
			c.fail(ptr+"/name", "must not begin or end with white space")
		case ns == "":
			c.fail(ptr+"/name", "has no letters or digits to derive a tool_id namespace from")
		default:
			if l, dup := names[r.Name]; dup {
				c.fail(ptr+"/name", "duplicate upstream name %q (first at line %d)", r.Name, l)
			} else if f, clash := spaces[ns]; clash {
				c.fail(ptr+"/name", "%q and upstream %q (line %d) map to the same namespace %q; rename one", r.Name, f.name, f.line, ns)
				names[r.Name] = line
			} else {
				names[r.Name] = line
				spaces[ns] = first{r.Name, line}
			}
		}

		var set []string
		if r.Command != nil {
			set = append(set, "command")
		}
		if r.URL != nil {
			set = append(set, "url")
		}
		if r.SSE != nil {
			set = append(set, "sse")
		}
		if r.Catalog != nil {
			set = append(set, "catalog")
		}
		switch len(set) {
		case 0:
			c.fail(ptr, "needs one of command, url, sse or catalog")
		case 1:
		default:
			c.fail(ptr+"/"+set[1], "%s and %s are mutually exclusive: an upstream has exactly one transport", set[0], set[1])
		}

		if r.Command != nil {
			u.Command = r.Command
			prog := r.Command[0]
			switch {
			case prog == "":
				c.fail(ptr+"/command/0", "the program must not be empty")
			case len(r.Command) == 1 && strings.ContainsAny(prog, " \t") && !filepath.IsAbs(prog):
				c.fail(ptr+"/command/0", "is one string with spaces; write the argv as a list, e.g. [npx, -y, \"@scope/server\"] (no shell is involved)")
			}
			u.Dir = c.baseDir
		}
		if r.URL != nil {
			u.URL = *r.URL
			c.checkURL(ptr+"/url", u.URL)
		}
		if r.SSE != nil {
			u.SSE = *r.SSE
			c.checkURL(ptr+"/sse", u.SSE)
		}
		if r.Catalog != nil {
			u.Catalog = c.path(ptr+"/catalog", *r.Catalog)
		}
		if r.Env != nil && r.Command == nil {
			c.fail(ptr+"/env", "is only valid with command")
		}
		u.Env = c.env(ptr+"/env", r.Env)
		if r.Dir != nil {
			if r.Command == nil {
				c.fail(ptr+"/dir", "is only valid with command")
			}
			u.Dir = c.path(ptr+"/dir", *r.Dir)
		}
		setString((*string)(&u.TrustLevel), r.TrustLevel)
		setString((*string)(&u.Risk), r.Risk)
		if r.Credentials != nil {
			u.Credentials = c.credentials(ptr+"/credentials", r.Credentials)
			if !u.Credentials.IsZero() && r.URL == nil && r.SSE == nil {
				c.fail(ptr+"/credentials", "apply to url and sse upstreams only (a command upstream gets env)")
			}
			if te := u.Credentials.TokenExchange; te != nil && te.Audience == "" {
				te.Audience = u.URL
				if te.Audience == "" {
					te.Audience = u.SSE
				}
			}
		}
		c.duration(ptr+"/connect_timeout", r.ConnectTimeout, &u.ConnectTimeout, true)
		c.duration(ptr+"/call_timeout", r.CallTimeout, &u.CallTimeout, true)
		setString(&u.ToolPrefix, r.ToolPrefix)
		c.sessions(ptr+"/sessions", r, &u)
		setBool(&u.Enabled, r.Enabled)
		if r.Workspace != nil {
			u.Workspace = c.workspace(ptr+"/workspace", r.Workspace)
		}
		if r.Egress != nil {
			u.Egress = c.egress(ptr+"/egress", r.Egress)
		}
		cfg.Upstreams = append(cfg.Upstreams, u)
	}
}

// sessions sets the session mode of a live upstream (command, url or sse):
// SessionsShared unless the file says otherwise. A catalog upstream has no
// session, so the key is refused there. The schema has checked the value.
func (c *checker) sessions(ptr string, r *rawUpstream, u *Upstream) {
	live := r.Command != nil || r.URL != nil || r.SSE != nil
	if live {
		u.Sessions = SessionsShared
	}
	if r.Sessions == nil {
		return
	}
	if !live {
		c.fail(ptr, "is only valid with command, url or sse (a catalog upstream has no upstream session)")
		return
	}
	u.Sessions = SessionMode(*r.Sessions)
}

// workspace checks an upstream's workspace block: roots are resolved
// against the configuration's directory and must be absolute.
func (c *checker) workspace(ptr string, r *rawWorkspace) *Workspace {
	w := &Workspace{}
	if len(r.Roots) == 0 {
		c.fail(ptr+"/roots", "needs at least one directory")
	}
	for i, root := range r.Roots {
		rp := ptr + "/roots/" + strconv.Itoa(i)
		if root == "" {
			c.fail(rp, "must not be empty")
			continue
		}
		p := c.path(rp, root)
		if !filepath.IsAbs(p) {
			c.fail(rp, "must be an absolute directory (or one relative to the configuration file)")
		}
		w.Roots = append(w.Roots, p)
	}
	w.PathArgs = c.argKeys(ptr+"/path_args", r.PathArgs)
	if w.PathArgs == nil {
		w.PathArgs = DefaultPathArgs()
	}
	return w
}

// egress checks an upstream's egress block.
func (c *checker) egress(ptr string, r *rawEgress) *Egress {
	e := &Egress{}
	if len(r.Allow) == 0 {
		c.fail(ptr+"/allow", "needs at least one host name, *.suffix or IP literal")
	}
	for i, a := range r.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			c.fail(ptr+"/allow/"+strconv.Itoa(i), "must be a host name, *.suffix or IP literal, optionally with :port (%v)", err)
			continue
		}
		e.Allow = append(e.Allow, strings.ToLower(strings.TrimSpace(a)))
	}
	e.URLArgs = c.argKeys(ptr+"/url_args", r.URLArgs)
	return e
}

// argKeys checks a list of argument keys (non-empty).
func (c *checker) argKeys(ptr string, keys []string) []string {
	for i, k := range keys {
		if strings.TrimSpace(k) == "" {
			c.fail(ptr+"/"+strconv.Itoa(i), "must not be empty")
		}
	}
	return nonEmpty(keys)
}

// checkURL refuses URLs that are not http(s) with a host, or that carry a
// credential.
func (c *checker) checkURL(ptr, s string) {
	u, err := url.Parse(s)
	if err != nil {
		c.fail(ptr, "is not a valid URL")
		return
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		c.fail(ptr, "must be an http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		c.fail(ptr, "has no host")
	case u.User != nil:
		c.fail(ptr, "credentials in the URL are not allowed; name an environment variable with credentials.bearer_env or credentials.headers_env")
	case u.Fragment != "" || strings.Contains(s, "#"):
		c.fail(ptr, "must not have a #fragment")
	default:
		for k := range u.Query() {
			if looksSecretKey(k) {
				c.fail(ptr, "query parameter %q looks like an inline secret; send it as a header named in credentials.headers_env", oneLine(k))
				return
			}
		}
	}
}

// env checks the environment of a command upstream: ${NAME} references
// are kept for ResolveEnv; literal values of secret-looking variables are
// refused.
func (c *checker) env(ptr string, env map[string]string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	for k, v := range env {
		kp := ptr + "/" + escapeToken(k)
		if name, ok := envRef(v); ok {
			if !validEnvName(name) {
				c.fail(kp, "%q is not a valid environment variable reference", oneLine(v))
			}
			continue
		}
		if strings.HasPrefix(v, "${") {
			c.fail(kp, "a reference is the whole value, written ${NAME}")
			continue
		}
		if v != "" && looksSecretEnvName(k) {
			c.fail(kp, "looks like an inline secret; write \"${%s}\" to take it from quiver's environment at start", k)
			continue
		}
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				c.fail(kp, "holds a URL with a password; write \"${%s}\" to take it from quiver's environment at start", k)
			}
		}
	}
	return env
}

// credentials checks one credentials block.
func (c *checker) credentials(ptr string, r *rawCredentials) Credentials {
	var cr Credentials
	setString(&cr.BearerEnv, r.BearerEnv)
	if r.BearerFile != nil {
		cr.BearerFile = c.path(ptr+"/bearer_file", *r.BearerFile)
	}
	if r.BearerEnv != nil && r.BearerFile != nil {
		c.fail(ptr+"/bearer_file", "bearer_env and bearer_file are mutually exclusive")
	}
	if r.TokenExchange != nil {
		if r.BearerEnv != nil || r.BearerFile != nil {
			c.fail(ptr+"/token_exchange", "token_exchange and bearer_env/bearer_file are mutually exclusive")
		}
		cr.TokenExchange = c.tokenExchange(ptr+"/token_exchange", r.TokenExchange)
	}
	if len(r.HeadersEnv) == 0 {
		return cr
	}
	canon := map[string]string{}
	for h := range r.HeadersEnv {
		hp := ptr + "/headers_env/" + escapeToken(h)
		ch := http.CanonicalHeaderKey(h)
		switch {
		case reservedHeader(ch):
			c.fail(hp, "header %s is set by the transport, not by credentials", ch)
		case ch == "Authorization" && (r.BearerEnv != nil || r.BearerFile != nil || r.TokenExchange != nil):
			c.fail(hp, "Authorization conflicts with bearer_env/bearer_file/token_exchange; keep one")
		}
		if other, dup := canon[ch]; dup {
			c.fail(hp, "repeats header %q (as %q)", ch, other)
		}
		canon[ch] = h
	}
	cr.HeadersEnv = r.HeadersEnv
	return cr
}

// tokenExchange checks a credentials.token_exchange block. The audience
// default (the upstream's URL) is filled in by the caller.
func (c *checker) tokenExchange(ptr string, r *rawTokenExchange) *TokenExchange {
	te := &TokenExchange{Subject: SubjectCaller, SubjectTokenType: SubjectTokenAccessToken}
	setString(&te.TokenURL, r.TokenURL)
	setString(&te.ClientID, r.ClientID)
	setString(&te.ClientSecretEnv, r.ClientSecretEnv)
	setString(&te.Audience, r.Audience)
	setString(&te.Scope, r.Scope)
	setString(&te.Subject, r.Subject)
	setString(&te.SubjectTokenType, r.SubjectTokenType)
	setString(&te.GatewayTokenEnv, r.GatewayTokenEnv)
	if te.TokenURL == "" {
		c.fail(ptr+"/token_url", "is required")
	} else if _, err := tokenexchange.CheckTokenURL(te.TokenURL); err != nil {
		c.fail(ptr+"/token_url", "%s", err.Error())
	} else if u, _ := url.Parse(te.TokenURL); u != nil {
		for k := range u.Query() {
			if looksSecretKey(k) {
				c.fail(ptr+"/token_url", "query parameter %q looks like an inline secret", oneLine(k))
				break
			}
		}
	}
	switch {
	case te.ClientID == "":
		c.fail(ptr+"/client_id", "is required")
	case strings.ContainsAny(te.ClientID, ":\r\n"):
		c.fail(ptr+"/client_id", "must not hold ':' or a line break")
	}
	if !validEnvName(te.ClientSecretEnv) {
		c.fail(ptr+"/client_secret_env", "must name an environment variable")
	}
	if r.GatewayTokenEnv != nil && !validEnvName(te.GatewayTokenEnv) {
		c.fail(ptr+"/gateway_token_env", "must name an environment variable")
	}
	if r.Audience != nil && strings.TrimSpace(te.Audience) == "" {
		c.fail(ptr+"/audience", "must not be empty (omit it to use the upstream's URL)")
	}
	if te.Subject != SubjectCaller {
		c.fail(ptr+"/subject", "must be %q", SubjectCaller)
	}
	switch te.SubjectTokenType {
	case SubjectTokenAccessToken, SubjectTokenJWT:
	default:
		c.fail(ptr+"/subject_token_type", "must be %q or %q", SubjectTokenAccessToken, SubjectTokenJWT)
	}
	return te
}

// reservedHeader reports whether the MCP transport owns header k
// (canonical form), so credentials may not set it.
func reservedHeader(k string) bool {
	switch k {
	case "Accept", "Accept-Encoding", "Connection", "Content-Length", "Content-Type", "Host",
		"Keep-Alive", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id", "Proxy-Connection",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// safety fills the safety-profile blocks (spec 001): auth, policy,
// approvals, receipts, incident and admin.
func (c *checker) safety(cfg *Config, raw *rawConfig) {
	if a := raw.Auth; a != nil {
		setString(&cfg.Auth.Realm, a.Realm)
		setInt(&cfg.Auth.MaxTokenBytes, a.MaxTokenBytes)
		if a.Local != nil {
			cfg.Auth.Local = *a.Local
		}
		for i, ri := range a.Issuers {
			ptr := "/auth/issuers/" + strconv.Itoa(i)
			is := identity.IssuerConfig{Name: ri.Name, Issuer: ri.Issuer, Audiences: ri.Audiences, Alg: ri.Alg,
				HS256SecretEnv: ri.HS256SecretEnv, JWKSURL: ri.JWKSURL, Claims: ri.Claims, DefaultActorType: ri.DefaultActorType}
			if ri.JWKSFile != "" {
				is.JWKSFile = c.path(ptr+"/jwks_file", ri.JWKSFile)
			}
			c.duration(ptr+"/jwks_refresh", ri.JWKSRefresh, &is.JWKSRefresh, true)
			c.duration(ptr+"/clock_skew", ri.ClockSkew, &is.ClockSkew, false)
			cfg.Auth.Issuers = append(cfg.Auth.Issuers, is)
		}
		if err := cfg.Auth.Validate(); err != nil {
			c.fail("/auth", "%s", oneLine(err.Error()))
		}
	}
	if p := raw.Policy; p != nil {
		cfg.Policy.File = c.path("/policy/file", p.File)
		c.duration("/policy/watch_interval", p.WatchInterval, &cfg.Policy.WatchInterval, true)
	}
	if a := raw.Approvals; a != nil {
		c.duration("/approvals/ttl", a.TTL, &cfg.Approvals.TTL, true)
		setInt(&cfg.Approvals.MaxPending, a.MaxPending)
	}
	if r := raw.Receipts; r != nil {
		setBool(&cfg.Receipts.Stdout, r.Stdout)
	}
	if in := raw.Incident; in != nil {
		setBool(&cfg.Incident.Persist, in.Persist)
	}
	if ad := raw.Admin; ad != nil {
		setString(&cfg.Admin.TokenEnv, ad.TokenEnv)
		if ad.Claim != nil {
			cl := *ad.Claim
			cfg.Admin.Claim = &cl
		}
	}
}
