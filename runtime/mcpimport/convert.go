package mcpimport

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/secretname"
	"github.com/quiver-mcp/quiver/toolid"
)

// Options steer a conversion.
type Options struct {
	// Environment is the quiver environment written: "dev" (the default)
	// or "prod".
	Environment string
	// Skeleton writes the prod skeleton of `quiver config import`: a
	// sandbox block per command server derived from its arguments and a
	// registry glob. Without it (a file served as it is) sandbox blocks
	// are written only in environment prod, which requires them, and no
	// registry.
	Skeleton bool
	// Home is the home directory ${userHome}, ${HOME} and ~ stand for; ""
	// leaves them to quiver (which expands ~ and ${HOME} in commands).
	Home string
	// Workspace is the directory ${workspaceFolder} stands for and
	// relative path arguments are relative to (the project: the parent of
	// .vscode for a VS Code file, else the file's directory).
	Workspace string
	// OutDir is the directory the YAML will be read from; command servers
	// get dir: Workspace when it differs.
	OutDir string
	// Exists reports whether a path exists; path arguments that exist
	// become the sandbox's writable paths. Nil: none exists.
	Exists func(path string) bool
	// IsDir reports whether an existing path is a directory. Nil: none
	// is.
	IsDir func(path string) bool
}

// Local returns the options that place the client file at path on this
// machine: the home directory, the file's project, the directory the YAML
// is read from (outDir), and the file system's answers.
func Local(path, outDir string) (Options, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Options{}, err
	}
	if outDir, err = filepath.Abs(outDir); err != nil {
		return Options{}, err
	}
	home, _ := os.UserHomeDir()
	return Options{Home: home, Workspace: Workspace(abs), OutDir: outDir,
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
		IsDir: func(p string) bool {
			st, err := os.Stat(p)
			return err == nil && st.IsDir()
		}}, nil
}

// Result is a converted file.
type Result struct {
	Dialect Dialect
	// Client names the client the file most likely belongs to, from its
	// name and dialect ("Claude Desktop", "VS Code", ...).
	Client string
	// YAML is the quiver configuration.
	YAML []byte
	// Servers counts the servers, Disabled those written enabled: false.
	Servers, Disabled int
	// Warnings are one line each: what was moved, dropped or must be set.
	Warnings []string
	// Env are the environment variables the configuration reads, sorted.
	Env []string
	// Origins are the file's keys of the upstreams, in their order
	// ("mcpServers.github").
	Origins []string
}

// server is one converted entry.
type server struct {
	name, origin string
	command      []string
	url, sse     string
	env          []member // values already quiver-form
	bearerEnv    string
	headersEnv   []member // header -> variable
	dir          string
	disabled     bool
	notes        []string // comments written above the entry
	sandbox      *sandboxPlan
}

// conv holds one conversion's state.
type conv struct {
	file    string
	o       Options
	inputs  map[string]string // input id -> description
	warn    []string
	envUsed map[string]bool
}

func (c *conv) fail(key, format string, args ...any) error {
	return &Error{File: c.file, Key: key, Msg: oneLine(fmt.Sprintf(format, args...))}
}

func (c *conv) warnf(format string, args ...any) {
	c.warn = append(c.warn, oneLine(fmt.Sprintf(format, args...)))
}

// Convert reads the MCP client configuration data (named name) and returns
// its quiver configuration. A file that is not JSON (JSONC), has no server
// list, or holds a value quiver cannot express gets an *Error naming the
// file and the key.
func Convert(name string, data []byte, o Options) (*Result, error) {
	c := &conv{file: name, o: o, inputs: map[string]string{}, envUsed: map[string]bool{}}
	if len(data) > MaxFileSize {
		return nil, c.fail("", "file is %d bytes, larger than the limit of %d", len(data), MaxFileSize)
	}
	if c.o.Environment == "" {
		c.o.Environment = "dev"
	}
	top, isObj, err := object(stripJSONC(data))
	switch {
	case err != nil:
		return nil, c.fail("", "not valid JSON: %v", err)
	case !isObj:
		return nil, c.fail("", "not a JSON object: an MCP client configuration is {\"mcpServers\": {...}} or {\"servers\": {...}}")
	}
	dialect, list := dialectOf(top)
	if dialect == "" {
		for _, m := range top {
			if what, ok := foreignKeys[m.key]; ok {
				return nil, c.fail(m.key, "%s is not a format quiver imports (it reads mcpServers: Claude Desktop, Cursor, Claude Code, Windsurf; and servers: VS Code)", what)
			}
		}
		for _, k := range quiverKeys {
			if _, ok := get(top, k); ok {
				return nil, c.fail(k, "this is a quiver configuration, not an MCP client's: use it as it is")
			}
		}
		return nil, c.fail("", "no mcpServers or servers key: not an MCP client configuration (Claude Desktop, Cursor, Claude Code and Windsurf use mcpServers; VS Code uses servers)")
	}
	listKey := string(dialect)
	if _, ok := get(top, "mcp"); ok && dialect == DialectVSCode {
		if _, direct := get(top, "servers"); !direct {
			listKey = "mcp.servers"
		}
	}
	if dialect == DialectVSCode {
		if err := c.readInputs(top); err != nil {
			return nil, err
		}
	}
	entries, isObj, err := object(list)
	switch {
	case err != nil:
		return nil, c.fail(listKey, "not valid JSON: %v", err)
	case !isObj:
		return nil, c.fail(listKey, "must be an object mapping server names to servers")
	case len(entries) > MaxServers:
		return nil, c.fail(listKey, "%d servers, at most %d", len(entries), MaxServers)
	}
	res := &Result{Dialect: dialect, Client: clientOf(name, dialect)}
	var servers []*server
	names := map[string]string{}
	for _, e := range entries {
		key := keyOf(listKey, e.key)
		s, err := c.server(key, e.key, e.val)
		if err != nil {
			return nil, err
		}
		if prev, dup := names[strings.ToLower(e.key)]; dup {
			return nil, c.fail(key, "names the same server as %q (names are compared case-insensitively)", prev)
		}
		names[strings.ToLower(e.key)] = e.key
		servers = append(servers, s)
		res.Origins = append(res.Origins, key)
		res.Servers++
		if s.disabled {
			res.Disabled++
		}
	}
	res.YAML = c.render(res, servers)
	res.Warnings = c.warn
	for k := range c.envUsed {
		res.Env = append(res.Env, k)
	}
	sort.Strings(res.Env)
	return res, nil
}

// clientOf guesses the client from the file's name.
func clientOf(name string, d Dialect) string {
	if d == DialectVSCode {
		return "VS Code"
	}
	slash := filepath.ToSlash(name)
	switch base := path.Base(slash); {
	case base == "claude_desktop_config.json":
		return "Claude Desktop"
	case base == ".mcp.json" || base == ".claude.json":
		return "Claude Code"
	case base == "mcp_config.json":
		return "Windsurf"
	case strings.Contains(slash, ".cursor/"):
		return "Cursor"
	}
	return "Claude Desktop, Cursor, Claude Code or Windsurf"
}

// readInputs records VS Code's inputs, which quiver maps to environment
// variables.
func (c *conv) readInputs(top []member) error {
	raw, ok := get(top, "inputs")
	if !ok {
		return nil
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return c.fail("inputs", "must be an array of objects")
	}
	for i, in := range list {
		key := fmt.Sprintf("inputs[%d]", i)
		id, ok := str(in["id"])
		if !ok || id == "" {
			return c.fail(key+".id", "must be a non-empty string")
		}
		desc, _ := str(in["description"])
		c.inputs[id] = desc
	}
	return nil
}

// inputEnv is the environment variable an ${input:ID} maps to.
func inputEnv(id string) string {
	b := []byte(strings.ToUpper(id))
	for i, ch := range b {
		if !(ch == '_' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9') {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

// serverKeys are the keys of a server entry Convert reads; ignoredKeys
// are client settings quiver has no use for (a warning names them).
var serverKeys = map[string]bool{"type": true, "command": true, "args": true, "env": true, "url": true, "serverUrl": true,
	"headers": true, "disabled": true, "cwd": true, "envFile": true, "transport": true}

var ignoredKeys = map[string]string{
	"autoApprove":   "quiver's policy and approvals decide",
	"alwaysAllow":   "quiver's policy and approvals decide",
	"disabledTools": "use quiver's policy to hide or deny tools",
	"timeout":       "set call_timeout",
	"description":   "",
	"trust":         "set trust_level",
	"dev":           "",
	"gallery":       "",
	"version":       "",
	"oauth":         "quiver sends credentials from its environment only",
}

// server converts one server entry.
func (c *conv) server(key, name string, raw json.RawMessage) (*server, error) {
	ms, isObj, err := object(raw)
	if err != nil || !isObj {
		return nil, c.fail(key, "must be an object with command (a local server) or url (a remote one)")
	}
	if strings.TrimSpace(name) == "" || len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, c.fail(key, "a server name must be 1 to 64 characters without control characters")
	}
	s := &server{name: name, origin: key}
	for _, m := range ms {
		if serverKeys[m.key] {
			continue
		}
		if why, ok := ignoredKeys[m.key]; ok {
			if why != "" {
				why = " (" + why + ")"
			}
			c.warnf("%s: ignored%s", keyOf(key, m.key), why)
			continue
		}
		return nil, c.fail(keyOf(key, m.key), "unknown key (a server has type, command, args, env, cwd, url, headers, disabled)")
	}
	if v, ok := get(ms, "transport"); ok {
		return nil, c.fail(keyOf(key, "transport"), "is not a server key; write type, url and headers on the server itself (%s)", oneLine(string(v)))
	}
	if _, ok := get(ms, "envFile"); ok {
		return nil, c.fail(keyOf(key, "envFile"), "is not supported: quiver reads no env files; export the variables to quiver's environment and reference them in env as ${NAME}")
	}
	typ := ""
	if v, ok := get(ms, "type"); ok {
		if typ, ok = str(v); !ok {
			return nil, c.fail(keyOf(key, "type"), "must be a string")
		}
	}
	if v, ok := get(ms, "disabled"); ok {
		if s.disabled, ok = boolean(v); !ok {
			return nil, c.fail(keyOf(key, "disabled"), "must be true or false")
		}
	}
	cmdRaw, hasCmd := get(ms, "command")
	urlKey := "url"
	urlRaw, hasURL := get(ms, "url")
	if v, ok := get(ms, "serverUrl"); ok {
		if hasURL {
			return nil, c.fail(keyOf(key, "serverUrl"), "url and serverUrl are both set; keep one")
		}
		urlKey, urlRaw, hasURL = "serverUrl", v, true
	}
	switch {
	case hasCmd && hasURL:
		return nil, c.fail(keyOf(key, urlKey), "command and %s are both set: a server is local (command) or remote (url)", urlKey)
	case !hasCmd && !hasURL:
		return nil, c.fail(key, "needs command (a local server) or url (a remote one)")
	}
	for _, k := range []string{"args", "env", "cwd"} {
		if _, ok := get(ms, k); ok && !hasCmd {
			return nil, c.fail(keyOf(key, k), "is only valid with command")
		}
	}
	if _, ok := get(ms, "headers"); ok && hasCmd {
		return nil, c.fail(keyOf(key, "headers"), "is only valid with url")
	}
	if hasCmd {
		switch typ {
		case "", "stdio":
		default:
			return nil, c.fail(keyOf(key, "type"), "is %q but the server has a command: a command server is stdio", typ)
		}
		return s, c.local(key, s, ms, cmdRaw)
	}
	switch typ {
	case "", "http", "streamable-http", "streamableHttp", "streamable_http":
	case "sse":
	case "stdio":
		return nil, c.fail(keyOf(key, "type"), "is stdio but the server has no command")
	default:
		return nil, c.fail(keyOf(key, "type"), "must be stdio, http, streamable-http or sse, not %q", typ)
	}
	return s, c.remote(key, urlKey, s, ms, urlRaw, typ == "sse")
}

// local converts a command server.
func (c *conv) local(key string, s *server, ms []member, cmdRaw json.RawMessage) error {
	prog, ok := str(cmdRaw)
	if !ok || strings.TrimSpace(prog) == "" {
		return c.fail(keyOf(key, "command"), "must be a non-empty string")
	}
	argv := []string{prog}
	if v, ok := get(ms, "args"); ok {
		args, bad, ok := strList(v)
		if !ok {
			if bad >= 0 {
				return c.fail(fmt.Sprintf("%s[%d]", keyOf(key, "args"), bad), "must be a string")
			}
			return c.fail(keyOf(key, "args"), "must be an array of strings")
		}
		argv = append(argv, args...)
	}
	for i, a := range argv {
		k := keyOf(key, "command")
		if i > 0 {
			k = fmt.Sprintf("%s[%d]", keyOf(key, "args"), i-1)
		}
		v, err := c.literal(k, a)
		if err != nil {
			return err
		}
		argv[i] = v
	}
	for i := 1; i < len(argv); i++ {
		// A relative path argument is written absolute, so that it means
		// the same whatever the working directory quiver gives the server.
		if a := argv[i]; !filepath.IsAbs(a) && !strings.HasPrefix(a, "~") {
			if p, ok := c.pathArg(a); ok {
				argv[i] = p
			}
		}
	}
	if len(argv) == 1 && strings.ContainsAny(argv[0], " \t") && !filepath.IsAbs(argv[0]) {
		return c.fail(keyOf(key, "command"), "is one string with spaces; write the program in command and its arguments in args (no shell is involved)")
	}
	s.command = argv
	if v, ok := get(ms, "cwd"); ok {
		dir, ok := str(v)
		if !ok || dir == "" {
			return c.fail(keyOf(key, "cwd"), "must be a non-empty string")
		}
		var err error
		if s.dir, err = c.literal(keyOf(key, "cwd"), dir); err != nil {
			return err
		}
		if !filepath.IsAbs(s.dir) && c.o.Workspace != "" {
			s.dir = filepath.Join(c.o.Workspace, s.dir)
		}
	} else if c.o.Workspace != "" && c.o.OutDir != "" && filepath.Clean(c.o.Workspace) != filepath.Clean(c.o.OutDir) {
		s.dir = c.o.Workspace
	}
	if v, ok := get(ms, "env"); ok {
		env, isObj, err := object(v)
		if err != nil || !isObj {
			return c.fail(keyOf(key, "env"), "must be an object of strings")
		}
		for _, e := range env {
			ek := keyOf(keyOf(key, "env"), e.key)
			if !secretname.ValidEnvName(e.key) {
				return c.fail(ek, "is not a valid environment variable name")
			}
			val, ok := str(e.val)
			if !ok {
				return c.fail(ek, "must be a string")
			}
			q, err := c.envValue(ek, e.key, val)
			if err != nil {
				return err
			}
			s.env = append(s.env, member{e.key, json.RawMessage(q)})
		}
	}
	s.sandbox = c.plan(s)
	return nil
}

// remote converts a url server.
func (c *conv) remote(key, urlKey string, s *server, ms []member, urlRaw json.RawMessage, sse bool) error {
	raw, ok := str(urlRaw)
	if !ok || raw == "" {
		return c.fail(keyOf(key, urlKey), "must be a non-empty string")
	}
	u, err := c.literal(keyOf(key, urlKey), raw)
	if err != nil {
		return err
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return c.fail(keyOf(key, urlKey), "must be an http:// or https:// URL")
	}
	if pu.User != nil {
		return c.fail(keyOf(key, urlKey), "holds credentials; quiver takes them from its environment (credentials.bearer_env or headers_env)")
	}
	for q := range pu.Query() {
		if secretname.Key(q) {
			return c.fail(keyOf(key, urlKey), "query parameter %q looks like a secret; send it as a header taken from quiver's environment", oneLine(q))
		}
	}
	if sse {
		s.sse = u
	} else {
		s.url = u
	}
	v, ok := get(ms, "headers")
	if !ok {
		return nil
	}
	hs, isObj, err := object(v)
	if err != nil || !isObj {
		return c.fail(keyOf(key, "headers"), "must be an object of strings")
	}
	for _, h := range hs {
		hk := keyOf(keyOf(key, "headers"), h.key)
		val, ok := str(h.val)
		if !ok {
			return c.fail(hk, "must be a string")
		}
		if err := c.header(hk, s, h.key, val); err != nil {
			return err
		}
	}
	return nil
}

// piece is a part of a value: literal text or a variable reference.
type piece struct {
	lit string
	env string // the environment variable referenced, when not literal
}

// template splits s at its ${...} references, resolving the ones that
// name a place (workspace, home) and refusing those quiver cannot take.
func (c *conv) template(key, s string) ([]piece, error) {
	var out []piece
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			if s != "" {
				out = append(out, piece{lit: s})
			}
			return out, nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, c.fail(key, "has an unclosed ${")
		}
		ref := s[i+2 : i+j]
		if i > 0 {
			out = append(out, piece{lit: s[:i]})
		}
		s = s[i+j+1:]
		name, _, hasDef := strings.Cut(ref, ":-")
		switch {
		case ref == "workspaceFolder" || ref == "workspaceRoot":
			if c.o.Workspace == "" {
				return nil, c.fail(key, "uses ${%s}, unknown here", ref)
			}
			out = append(out, piece{lit: c.o.Workspace})
		case ref == "workspaceFolderBasename":
			out = append(out, piece{lit: filepath.Base(c.o.Workspace)})
		case ref == "userHome" || ref == "HOME" || ref == "env:HOME":
			if c.o.Home == "" {
				out = append(out, piece{lit: "${HOME}"})
			} else {
				out = append(out, piece{lit: c.o.Home})
			}
		case ref == "pathSeparator" || ref == "/":
			out = append(out, piece{lit: "/"})
		case strings.HasPrefix(ref, "input:"):
			id := strings.TrimPrefix(ref, "input:")
			if _, ok := c.inputs[id]; !ok {
				return nil, c.fail(key, "uses ${input:%s}, which no entry of inputs declares", oneLine(id))
			}
			env := inputEnv(id)
			c.warnf("%s: ${input:%s} is read from the environment variable %s (quiver prompts for nothing)", key, id, env)
			out = append(out, piece{env: env})
		case strings.HasPrefix(ref, "env:") && secretname.ValidEnvName(ref[4:]):
			out = append(out, piece{env: ref[4:]})
		case secretname.ValidEnvName(name):
			if hasDef {
				// The default is not shown: it may be a secret.
				c.warnf("%s: the default of ${%s:-...} is dropped: quiver needs %s set", key, name, name)
			}
			out = append(out, piece{env: name})
		default:
			return nil, c.fail(key, "uses ${%s}, which quiver cannot resolve (it reads ${env:NAME}, ${NAME}, ${input:ID}, ${workspaceFolder} and ${userHome})", oneLine(ref))
		}
	}
}

// literal resolves a value quiver takes as it is (a command, an argument,
// a URL, a directory): place variables are resolved, environment
// references refused.
func (c *conv) literal(key, s string) (string, error) {
	ps, err := c.template(key, s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range ps {
		if p.env != "" {
			return "", c.fail(key, "takes ${%s} from the environment; quiver passes this value as it is: move the secret to env (a command server) or headers (a remote one)", p.env)
		}
		b.WriteString(p.lit)
	}
	return b.String(), nil
}

// envValue returns the quiver form of one env entry: a literal, or a
// whole-value reference ${NAME}.
func (c *conv) envValue(key, name, val string) (string, error) {
	ps, err := c.template(key, val)
	if err != nil {
		return "", err
	}
	switch {
	case len(ps) == 1 && ps[0].env != "":
		c.envUsed[ps[0].env] = true
		return "${" + ps[0].env + "}", nil
	case len(ps) > 1:
		for _, p := range ps {
			if p.env != "" {
				return "", c.fail(key, "mixes text with ${%s}; quiver takes a variable as the whole value: export the whole value as %s", p.env, name)
			}
		}
	}
	lit := ""
	for _, p := range ps {
		lit += p.lit
	}
	if lit != "" && (secretname.EnvName(name) || hasPassword(lit)) {
		c.envUsed[name] = true
		c.warnf("%s: the literal value is not copied; quiver reads it from its environment variable %s at start: export it there", key, name)
		return "${" + name + "}", nil
	}
	return lit, nil
}

// hasPassword reports whether v is a URL with a password.
func hasPassword(v string) bool {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return false
	}
	_, has := u.User.Password()
	return has
}

// header converts one header: a whole-value reference becomes
// headers_env, "Bearer ${X}" becomes bearer_env, and a literal value is
// moved to a variable named after the server and the header.
func (c *conv) header(key string, s *server, name, val string) error {
	if !validHeaderName(name) {
		return c.fail(key, "is not a valid header name")
	}
	ps, err := c.template(key, val)
	if err != nil {
		return err
	}
	if strings.EqualFold(name, "Authorization") && len(ps) == 2 && ps[1].env != "" && strings.EqualFold(strings.TrimSpace(ps[0].lit), "bearer") {
		if s.bearerEnv != "" {
			return c.fail(key, "a second bearer credential")
		}
		s.bearerEnv = ps[1].env
		c.envUsed[ps[1].env] = true
		return nil
	}
	if len(ps) == 1 && ps[0].env != "" {
		s.headersEnv = append(s.headersEnv, member{name, json.RawMessage(ps[0].env)})
		c.envUsed[ps[0].env] = true
		return nil
	}
	env := "QUIVER_" + inputEnv(toolid.Namespace(s.name)) + "_" + inputEnv(name)
	if strings.EqualFold(name, "Authorization") && len(ps) == 1 && strings.HasPrefix(strings.ToLower(ps[0].lit), "bearer ") && s.bearerEnv == "" {
		env = "QUIVER_" + inputEnv(toolid.Namespace(s.name)) + "_TOKEN"
		s.bearerEnv = env
		c.envUsed[env] = true
		c.warnf("%s: the literal token is not copied; quiver reads it from %s at start: export the token (without \"Bearer \") there", key, env)
		return nil
	}
	s.headersEnv = append(s.headersEnv, member{name, json.RawMessage(env)})
	c.envUsed[env] = true
	c.warnf("%s: header values come from quiver's environment only; the value is not copied: export the whole header value as %s", key, env)
	return nil
}

// validHeaderName reports whether k is an HTTP token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		ch := k[i]
		if ch <= ' ' || ch >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", ch) >= 0 {
			return false
		}
	}
	return true
}

// Workspace is the project directory of the client file at abs: the parent
// of a .vscode or .cursor directory holding it, else its own directory.
func Workspace(abs string) string {
	dir := filepath.Dir(abs)
	switch filepath.Base(dir) {
	case ".vscode", ".cursor", ".windsurf":
		return filepath.Dir(dir)
	}
	return dir
}
