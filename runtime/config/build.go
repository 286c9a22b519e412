package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
	"github.com/quiver-mcp/quiver/runtime/egress"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/outpolicy"
	"github.com/quiver-mcp/quiver/runtime/tokenexchange"
	"github.com/quiver-mcp/quiver/runtime/units"
	"github.com/quiver-mcp/quiver/toolid"
)

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

// build decodes a schema-valid tree onto the defaults, fills in the
// defaults that depend on other keys, resolves paths and checks what the
// schema cannot.
func build(t *tree, baseDir string) (*Config, error) {
	c := &checker{t: t, baseDir: baseDir}
	cfg := Default()
	cfg.Source = t.file
	cfg.Dir = baseDir
	dec := decoder{fail: c.fail}
	dec.decode("", t.value, reflect.ValueOf(cfg).Elem())

	c.listen(&cfg.Listen)
	cfg.Timing.ReadyTimeout = time.Duration(cfg.Listen.ReadyTimeout)
	cfg.StateDir = c.stateDir(cfg.StateDir)
	c.state(&cfg.State)
	c.upstreams(cfg.Upstreams)
	for i, g := range cfg.Registry {
		ptr := "/registry/" + strconv.Itoa(i)
		p := c.path(ptr, g)
		if _, err := filepath.Match(p, ""); err != nil {
			c.fail(ptr, "is not a valid glob: %v", err)
		}
		cfg.Registry[i] = p
	}
	c.toolGlobs("/firewall/off_for", cfg.Firewall.OffFor)
	c.duration("/artifacts/ttl", cfg.Artifacts.TTL, true)
	c.size("/artifacts/max_bytes", cfg.Artifacts.MaxBytes)
	c.duration("/retry/base_delay", cfg.Retry.BaseDelay, false)
	c.duration("/retry/max_delay", cfg.Retry.MaxDelay, false)
	if c.has("/retry") && cfg.Retry.MaxDelay < cfg.Retry.BaseDelay {
		ptr := "/retry/max_delay"
		if !c.has(ptr) {
			ptr = "/retry/base_delay"
		}
		c.fail(ptr, "max_delay (%s) must be at least base_delay (%s)", cfg.Retry.MaxDelay, cfg.Retry.BaseDelay)
	}
	c.duration("/cache/ttl", cfg.Cache.TTL, true)
	c.toolGlobs("/cache/allow", cfg.Cache.Allow)
	for scope := range cfg.RateLimits {
		if g, ok := strings.CutPrefix(scope, "tool:"); ok {
			if _, err := path.Match(g, ""); err != nil {
				c.fail("/rate_limits/"+jsonpointer.Escape(scope), "is not a valid tool_id glob: %v", err)
			}
		}
	}
	c.toolGlobs("/expose/direct", cfg.Expose.Direct)
	c.size("/schema/max_bytes", cfg.Schema.MaxBytes)
	c.safety(cfg)
	if !c.has("/strict_args") {
		cfg.StrictArgs = cfg.Environment == guard.EnvProd
	}
	c.duration("/incident/quarantine/window", cfg.Incident.Quarantine.Window, true)
	if len(c.errs) > 0 {
		return nil, earliest(c.errs)
	}
	return cfg, nil
}

// has reports whether the file sets the value at ptr.
func (c *checker) has(ptr string) bool {
	_, ok := c.t.locs[ptr]
	return ok
}

// duration checks the duration at ptr, when the file sets it (the
// decoder has parsed it).
func (c *checker) duration(ptr string, d units.Duration, positive bool) {
	switch {
	case !c.has(ptr):
	case d < 0:
		c.fail(ptr, "must not be negative")
	case positive && d == 0:
		c.fail(ptr, "must be greater than 0")
	}
}

// size checks the size at ptr, when the file sets it; sizes are positive.
func (c *checker) size(ptr string, n units.Size) {
	if c.has(ptr) && n <= 0 {
		c.fail(ptr, "must be at least 1 byte")
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

// expandHome expands a leading ~ (alone or before /) and every ${HOME} in
// one word of a command, as a shell would for the program and its path
// arguments; MCP client files write them so. Other words are unchanged.
func (c *checker) expandHome(ptr, a string) string {
	tilde := a == "~" || strings.HasPrefix(a, "~/")
	if !tilde && !strings.Contains(a, "${HOME}") {
		return a
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		c.fail(ptr, "uses ~ or ${HOME} but the home directory is not known ($HOME is unset)")
		return a
	}
	if tilde {
		a = home + a[1:]
	}
	return strings.ReplaceAll(a, "${HOME}", home)
}

// toolGlobs checks tool_id globs (path.Match syntax).
func (c *checker) toolGlobs(ptr string, globs []string) {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			c.fail(ptr+"/"+strconv.Itoa(i), "is not a valid glob: %v", err)
		}
	}
}

// stateDir places the state directory: '~' and $XDG_STATE_HOME are
// expanded, relative paths are relative to the configuration's directory.
// p is the decoded value: the default when the file does not set it.
func (c *checker) stateDir(p string) string {
	const ptr = "/state_dir"
	if !c.has(ptr) {
		sd, err := defaultStateDir()
		if err != nil {
			l := c.t.locs[""]
			c.errs = append(c.errs, &Error{File: c.t.file, Line: l.line, Column: l.col, Field: "state_dir",
				Msg: fmt.Sprintf("cannot place the default (%v); set state_dir", err)})
		}
		return sd
	}
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

// listen checks the listen block and resolves its paths.
func (c *checker) listen(l *Listen) {
	if c.has("/listen/addr") {
		host, port, err := net.SplitHostPort(l.Addr)
		if err != nil {
			c.fail("/listen/addr", "must be host:port, e.g. 127.0.0.1:8080")
		} else if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			c.fail("/listen/addr", "must be host:port with a port number 0..65535")
		}
	}
	if l.TLS != nil {
		cert, key := c.has("/listen/tls/cert"), c.has("/listen/tls/key")
		switch {
		case !cert && !key:
			c.fail("/listen/tls", "needs both cert and key")
		case !cert:
			c.fail("/listen/tls", "needs cert as well as key")
		case !key:
			c.fail("/listen/tls", "needs key as well as cert")
		default:
			l.TLS.Cert, l.TLS.Key = c.path("/listen/tls/cert", l.TLS.Cert), c.path("/listen/tls/key", l.TLS.Key)
		}
		if l.Transport != TransportHTTP {
			c.fail("/listen/tls", "is only valid with transport http")
		}
	}
	c.duration("/listen/session_idle_timeout", l.SessionIdleTimeout, false)
	if l.Sessions.MaxPerPrincipal > l.Sessions.MaxTotal {
		c.fail("/listen/sessions/max_per_principal", "exceeds max_total")
	}
	c.duration("/listen/ready_timeout", l.ReadyTimeout, true)
	c.duration("/listen/mrtr_hold", l.MRTRHold, true)
}

// upstreams checks every upstream entry and fills in the defaults that
// depend on the entry's other keys: the tool prefix (from the name), the
// working directory and the session mode (from the transport).
func (c *checker) upstreams(us []Upstream) {
	type first struct {
		name string
		line int
	}
	names := map[string]int{}
	spaces := map[string]first{}
	for i := range us {
		u := &us[i]
		ptr := "/upstreams/" + strconv.Itoa(i)
		has := func(key string) bool { return c.has(ptr + "/" + key) }
		line := c.t.locs[ptr+"/name"].kline

		switch ns := toolid.Namespace(u.Name); {
		case strings.TrimSpace(u.Name) != u.Name:
			c.fail(ptr+"/name", "must not begin or end with white space")
		case ns == "":
			c.fail(ptr+"/name", "has no letters or digits to derive a tool_id namespace from")
		default:
			if l, dup := names[u.Name]; dup {
				c.fail(ptr+"/name", "duplicate upstream name %q (first at line %d)", u.Name, l)
			} else if f, clash := spaces[ns]; clash {
				c.fail(ptr+"/name", "%q and upstream %q (line %d) map to the same namespace %q; rename one", u.Name, f.name, f.line, ns)
				names[u.Name] = line
			} else {
				names[u.Name] = line
				spaces[ns] = first{u.Name, line}
			}
		}

		var set []string
		for _, key := range []string{"command", "url", "sse", "catalog", "cli"} {
			if has(key) {
				set = append(set, key)
			}
		}
		switch len(set) {
		case 0:
			c.fail(ptr, "needs one of command, url, sse, catalog or cli")
		case 1:
		default:
			c.fail(ptr+"/"+set[1], "%s and %s are mutually exclusive: an upstream has exactly one transport", set[0], set[1])
		}

		command := has("command")
		if command && len(u.Command) > 0 {
			prog := u.Command[0]
			switch {
			case prog == "":
				c.fail(ptr+"/command/0", "the program must not be empty")
			case len(u.Command) == 1 && strings.ContainsAny(prog, " \t") && !filepath.IsAbs(prog):
				c.fail(ptr+"/command/0", "is one string with spaces; write the argv as a list, e.g. [npx, -y, \"@scope/server\"] (no shell is involved)")
			}
		}
		for j, a := range u.Command {
			u.Command[j] = c.expandHome(ptr+"/command/"+strconv.Itoa(j), a)
		}
		if has("url") {
			c.checkURL(ptr+"/url", u.URL)
		}
		if has("sse") {
			c.checkURL(ptr+"/sse", u.SSE)
		}
		if has("catalog") {
			u.Catalog = c.path(ptr+"/catalog", u.Catalog)
		}
		if u.CLI != nil {
			for i, g := range u.CLI.Manifests {
				gp := ptr + "/cli/manifests/" + strconv.Itoa(i)
				u.CLI.Manifests[i] = c.path(gp, g)
				if _, err := filepath.Match(u.CLI.Manifests[i], ""); err != nil {
					c.fail(gp, "is not a valid glob: %v", err)
				}
			}
		}
		for g, rules := range u.OutputPolicies {
			gp := ptr + "/output_policies/" + jsonpointer.Escape(g)
			if _, err := path.Match(g, ""); err != nil {
				c.fail(gp, "is not a valid tool name glob: %v", err)
			}
			if err := checkOutputPolicy(rules); err != nil {
				c.fail(gp, "%s", oneLine(err.Error()))
			}
		}
		if has("env") && !command {
			c.fail(ptr+"/env", "is only valid with command")
		}
		c.env(ptr+"/env", u.Env)
		switch {
		case has("dir"):
			if !command {
				c.fail(ptr+"/dir", "is only valid with command")
			}
			u.Dir = c.path(ptr+"/dir", u.Dir)
		case command:
			u.Dir = c.baseDir
		}
		if has("credentials") {
			c.credentials(ptr+"/credentials", &u.Credentials)
			if !u.Credentials.IsZero() && !has("url") && !has("sse") {
				c.fail(ptr+"/credentials", "apply to url and sse upstreams only (a command upstream gets env)")
			}
			if te := u.Credentials.TokenExchange; te != nil && te.Audience == "" {
				te.Audience = u.URL
				if te.Audience == "" {
					te.Audience = u.SSE
				}
			}
		}
		c.duration(ptr+"/connect_timeout", u.ConnectTimeout, true)
		c.duration(ptr+"/call_timeout", u.CallTimeout, true)
		if !has("tool_prefix") {
			u.ToolPrefix = defaultToolPrefix(u.Name)
		}
		live := command || has("url") || has("sse")
		switch {
		case !has("sessions"):
			if live {
				u.Sessions = SessionsShared
			}
		case !live:
			// A catalog upstream has no session, so the key is refused
			// there; the schema has checked the value.
			c.fail(ptr+"/sessions", "is only valid with command, url or sse (a catalog upstream has no upstream session)")
		}
		if u.Workspace != nil {
			c.workspace(ptr+"/workspace", u.Workspace)
		}
		if u.Egress != nil {
			c.egress(ptr+"/egress", u.Egress)
		}
		if u.Sandbox != nil {
			c.sandbox(ptr+"/sandbox", u.Sandbox, command || u.CLI != nil)
		}
	}
}

// workspace checks an upstream's workspace block: roots are resolved
// against the configuration's directory and must be absolute.
func (c *checker) workspace(ptr string, w *Workspace) {
	if len(w.Roots) == 0 {
		c.fail(ptr+"/roots", "needs at least one directory")
	}
	roots := w.Roots[:0]
	for i, root := range w.Roots {
		rp := ptr + "/roots/" + strconv.Itoa(i)
		if root == "" {
			c.fail(rp, "must not be empty")
			continue
		}
		p := c.path(rp, root)
		if !filepath.IsAbs(p) {
			c.fail(rp, "must be an absolute directory (or one relative to the configuration file)")
		}
		roots = append(roots, p)
	}
	w.Roots = nonEmpty(roots)
	c.argKeys(ptr+"/path_args", w.PathArgs)
	if w.PathArgs == nil {
		w.PathArgs = DefaultPathArgs()
	}
}

// egress checks an upstream's egress block; hosts are kept lower-cased.
func (c *checker) egress(ptr string, e *Egress) {
	if len(e.Allow) == 0 {
		c.fail(ptr+"/allow", "needs at least one host name, *.suffix or IP literal")
	}
	allow := e.Allow[:0]
	for i, a := range e.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			c.fail(ptr+"/allow/"+strconv.Itoa(i), "must be a host name, *.suffix or IP literal, optionally with :port (%v)", err)
			continue
		}
		allow = append(allow, strings.ToLower(strings.TrimSpace(a)))
	}
	e.Allow = nonEmpty(allow)
	c.argKeys(ptr+"/url_args", e.URLArgs)
}

// nonEmpty returns s, or nil when s is empty.
func nonEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// argKeys checks a list of argument keys (non-empty).
func (c *checker) argKeys(ptr string, keys []string) {
	for i, k := range keys {
		if strings.TrimSpace(k) == "" {
			c.fail(ptr+"/"+strconv.Itoa(i), "must not be empty")
		}
	}
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
func (c *checker) env(ptr string, env map[string]string) {
	for k, v := range env {
		kp := ptr + "/" + jsonpointer.Escape(k)
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
}

// credentials checks one credentials block and resolves its token file.
func (c *checker) credentials(ptr string, cr *Credentials) {
	bearerEnv, bearerFile, exchange := c.has(ptr+"/bearer_env"), c.has(ptr+"/bearer_file"), c.has(ptr+"/token_exchange")
	if bearerFile {
		cr.BearerFile = c.path(ptr+"/bearer_file", cr.BearerFile)
	}
	if bearerEnv && bearerFile {
		c.fail(ptr+"/bearer_file", "bearer_env and bearer_file are mutually exclusive")
	}
	if exchange {
		if bearerEnv || bearerFile {
			c.fail(ptr+"/token_exchange", "token_exchange and bearer_env/bearer_file are mutually exclusive")
		}
		c.tokenExchange(ptr+"/token_exchange", cr.TokenExchange)
	}
	canon := map[string]string{}
	for h := range cr.HeadersEnv {
		hp := ptr + "/headers_env/" + jsonpointer.Escape(h)
		ch := http.CanonicalHeaderKey(h)
		switch {
		case reservedHeader(ch):
			c.fail(hp, "header %s is set by the transport, not by credentials", ch)
		case ch == "Authorization" && (bearerEnv || bearerFile || exchange):
			c.fail(hp, "Authorization conflicts with bearer_env/bearer_file/token_exchange; keep one")
		}
		if other, dup := canon[ch]; dup {
			c.fail(hp, "repeats header %q (as %q)", ch, other)
		}
		canon[ch] = h
	}
}

// tokenExchange checks a credentials.token_exchange block. The audience
// default (the upstream's URL) is filled in by the caller.
func (c *checker) tokenExchange(ptr string, te *TokenExchange) {
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
	if c.has(ptr+"/gateway_token_env") && !validEnvName(te.GatewayTokenEnv) {
		c.fail(ptr+"/gateway_token_env", "must name an environment variable")
	}
	if c.has(ptr+"/audience") && strings.TrimSpace(te.Audience) == "" {
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
}

// state checks the state section: a redis backend needs a redis:// or
// rediss:// URL without a password in it. A password_env naming an unset
// variable is reported at start (Redis.ResolvePassword), not here.
func (c *checker) state(s *State) {
	switch s.Backend {
	case StateEmbedded, StateRedis:
	default:
		c.fail("/state/backend", "must be %q or %q", StateEmbedded, StateRedis)
		return
	}
	if s.Redis.TLS.CAFile != "" {
		s.Redis.TLS.CAFile = c.path("/state/redis/tls/ca_file", s.Redis.TLS.CAFile)
	}
	if s.Backend != StateRedis {
		return
	}
	ptr := "/state/redis/url"
	if s.Redis.URL == "" {
		switch {
		case c.has(ptr):
		case c.has("/state/redis"):
			ptr = "/state/redis"
		default:
			ptr = "/state/backend"
		}
		c.fail(ptr, "backend redis needs state.redis.url (redis://host:port/db or rediss://...)")
		return
	}
	u, err := url.Parse(s.Redis.URL)
	switch {
	case err != nil:
		c.fail(ptr, "is not a valid URL")
	case u.Scheme != "redis" && u.Scheme != "rediss":
		c.fail(ptr, "must be a redis:// or rediss:// URL")
	case u.Host == "" || u.Hostname() == "":
		c.fail(ptr, "has no host")
	case hasPassword(u):
		c.fail(ptr, "a password in the URL is not allowed; name an environment variable with state.redis.password_env")
	}
	if !s.Redis.TLS.IsZero() && u != nil && u.Scheme != "rediss" {
		c.fail("/state/redis/tls", "applies to rediss:// URLs only")
	}
}

// hasPassword reports whether u carries a password.
func hasPassword(u *url.URL) bool {
	_, ok := u.User.Password()
	return ok
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

// safety checks the safety-profile blocks (spec 001) and resolves their
// paths: auth, policy and approvals.
func (c *checker) safety(cfg *Config) {
	for i := range cfg.Auth.Issuers {
		is := &cfg.Auth.Issuers[i]
		ptr := "/auth/issuers/" + strconv.Itoa(i)
		if is.JWKSFile != "" {
			is.JWKSFile = c.path(ptr+"/jwks_file", is.JWKSFile)
		}
		c.duration(ptr+"/jwks_refresh", is.JWKSRefresh, true)
		c.duration(ptr+"/clock_skew", is.ClockSkew, false)
	}
	if c.has("/auth") {
		if err := cfg.Auth.Validate(); err != nil {
			c.fail("/auth", "%s", oneLine(err.Error()))
		}
	}
	if c.has("/policy") {
		cfg.Policy.File = c.path("/policy/file", cfg.Policy.File)
		c.duration("/policy/watch_interval", cfg.Policy.WatchInterval, true)
	}
	c.duration("/approvals/ttl", cfg.Approvals.TTL, true)
	if c.has("/capabilities/key_file") {
		cfg.Capabilities.KeyFile = c.path("/capabilities/key_file", cfg.Capabilities.KeyFile)
	}
	c.duration("/capabilities/default_duration", cfg.Capabilities.DefaultDuration, true)
	c.duration("/capabilities/max_duration", cfg.Capabilities.MaxDuration, true)
	c.duration("/capabilities/proof_window", cfg.Capabilities.ProofWindow, true)
	if cfg.Capabilities.DefaultDuration > cfg.Capabilities.MaxDuration {
		c.fail("/capabilities/default_duration", "must not exceed max_duration (%s)", cfg.Capabilities.MaxDuration)
	}
}

// checkOutputPolicy compiles an upstream's output policy rules.
func checkOutputPolicy(rules map[string]string) error {
	m := make(map[string]outpolicy.Action, len(rules))
	for k, v := range rules {
		m[k] = outpolicy.Action(v)
	}
	_, err := outpolicy.Compile(m)
	return err
}
