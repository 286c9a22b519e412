// Package config loads the configuration of `quiver serve`: one YAML (or
// JSON) file, validated against the embedded schemas/config.schema.json and
// then by the semantic rules a schema cannot express, with errors that name
// the file, line, column and field:
//
//	quiver.yaml:12:5: upstreams[1].trust_level: must be one of internal, verified, community, unknown
//
// Every relative path in the file (catalog, dir, registry globs, tls files,
// bearer_file, a relative state_dir) is relative to the directory of the
// file, and Load returns it resolved to an absolute path. A command
// upstream's working directory defaults to that directory too.
//
// Nothing is read from the environment at load time except $HOME and
// $XDG_STATE_HOME, to place state_dir. Secrets are never part of the file:
// credentials name environment variables (or a token file), and the
// runtime resolves them when it connects with Upstream.ResolveHeaders and
// Upstream.ResolveEnv. Keys that look like inline secrets are refused.
package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/toolid"
)

// MaxFileSize is the largest configuration file Load and Parse accept.
const MaxFileSize = 1 << 20

// Mode is what quiver lists to its client.
type Mode string

// The modes of `quiver serve`.
const (
	// ModeGateway lists the meta-tools (tool_browse, tool_hydrate,
	// tool_execute, tool_view) and, with resources or prompts, their
	// counterparts.
	ModeGateway Mode = "gateway"
	// ModeProxy lists one stripped entry per upstream tool plus
	// tool_hydrate, tool_execute and tool_view.
	ModeProxy Mode = "proxy"
	// ModeDirect lists every upstream tool with its real schema, named
	// with its upstream's tool_prefix.
	ModeDirect Mode = "direct"
)

// Environment selects how unclassified tools are treated.
type Environment string

// The environments.
const (
	// EnvProd denies tools that no registry manifest classifies.
	EnvProd Environment = "prod"
	// EnvDev allows them with a warning.
	EnvDev Environment = "dev"
)

// Transport is how clients reach quiver.
type Transport string

// The listen transports.
const (
	TransportStdio Transport = "stdio" // one client: the parent process
	TransportHTTP  Transport = "http"  // MCP streamable HTTP
)

// TrustLevel says how far an upstream server is trusted.
type TrustLevel string

// The trust levels, most trusted first.
const (
	TrustInternal  TrustLevel = "internal"
	TrustVerified  TrustLevel = "verified"
	TrustCommunity TrustLevel = "community"
	TrustUnknown   TrustLevel = "unknown"
)

// Risk is the default risk of an upstream's tools.
type Risk string

// The risk levels, least risky first.
const (
	RiskLow      Risk = "LOW"
	RiskMedium   Risk = "MEDIUM"
	RiskHigh     Risk = "HIGH"
	RiskCritical Risk = "CRITICAL"
)

// SessionMode is how a live upstream's MCP sessions map to downstream
// client sessions.
type SessionMode string

// The session modes of an upstream.
const (
	// SessionsShared: one upstream MCP session serves every downstream
	// client. Server-to-client requests (sampling, elicitation) and log
	// notifications are routed to the client whose call is in flight, and
	// refused when calls of several clients are in flight at once.
	SessionsShared SessionMode = "shared"
	// SessionsPerClient: each downstream session gets its own upstream
	// session (a new MCP session over HTTP, a new child process over
	// stdio), opened on its first call and closed when the downstream
	// session ends, so every notification and request is routed without
	// ambiguity.
	SessionsPerClient SessionMode = "per_client"
)

// Default values of settings that are not a zero value.
const (
	DefaultListenAddr         = "127.0.0.1:8080"
	DefaultListenPath         = "/mcp"
	DefaultConnectTimeout     = 10 * time.Second
	DefaultCallTimeout        = 60 * time.Second
	DefaultSessionIdleTimeout = time.Hour
	DefaultTopK               = 10
	DefaultMaxChildren        = 20
	DefaultMaxInlineTokens    = 800
	DefaultArtifactTTL        = 24 * time.Hour
	DefaultArtifactMaxBytes   = int64(1) << 30
	DefaultRetryMaxAttempts   = 1
	DefaultRetryBaseDelay     = 100 * time.Millisecond
	DefaultRetryMaxDelay      = 2 * time.Second
	DefaultCacheTTL           = 60 * time.Second
	DefaultCacheMaxEntries    = 256
	DefaultSchemaMaxBytes     = int64(256) << 10 // as catalog.DefaultSchemaLimits
	DefaultSchemaMaxDepth     = 32               // as catalog.DefaultSchemaLimits
	DefaultSchemaMaxProperty  = 2048             // as catalog.DefaultSchemaLimits
)

// DefaultRetryableCodes are the error codes retried when retry is on.
func DefaultRetryableCodes() []string {
	return []string{"UPSTREAM_TIMEOUT", "UPSTREAM_UNAVAILABLE"}
}

// Config is the loaded configuration with every default applied and every
// path resolved. Empty lists and maps are nil.
type Config struct {
	// Source is the file name as given to Load or Parse; "" for Default
	// and FromCatalog. It is not part of Effective.
	Source string
	// Dir is the absolute directory relative paths were resolved against.
	// It is not part of Effective.
	Dir string

	Mode        Mode
	Environment Environment
	Listen      Listen
	// StateDir is the absolute state directory (artifacts, idempotency
	// records, receipts); "" only when neither $XDG_STATE_HOME nor the home
	// directory is known (Default, FromCatalog).
	StateDir  string
	Upstreams []Upstream
	// Registry holds absolute glob paths of tool_registry manifests.
	Registry []string
	Browse   Browse
	Firewall Firewall
	// Artifacts bounds the artifact store.
	Artifacts Artifacts
	Retry     Retry
	Cache     Cache
	// RateLimits maps a meta-tool name (tool_browse, tool_execute,
	// tool_view, tool_hydrate) or "tool:<tool_id glob>" to its limits.
	RateLimits map[string]RateLimit
	Expose     Expose
	// Schema bounds upstream tool schemas at ingest.
	Schema SchemaLimits
	// TolerantArgs turns on the argument repairs of spec 003 §4.4.
	TolerantArgs bool
	// Principals holds capability constraints by principal name: the stdio
	// principal (the process owner's user name), or "*" for every principal
	// not named (HTTP sessions until they authenticate).
	Principals map[string]Principal
	// Auth is who may call quiver: JWT issuers over HTTP, the local
	// principal over stdio (spec 001 MUST 2).
	Auth identity.Config
	// Policy is the policy file; File "" means no policy (allow all).
	Policy Policy
	// Approvals configure the approval store.
	Approvals Approvals
	// Receipts configure the audit receipts (state_dir/receipts).
	Receipts Receipts
	// Incident configures the incident-mode state.
	Incident Incident
	// Admin configures the operator API (/admin/v1/).
	Admin Admin
	Log   Log
}

// Policy names the policy file and how often it is re-read.
type Policy struct {
	// File is the absolute path of the policy file; "" for none.
	File          string
	WatchInterval time.Duration
}

// Approvals bound the approval store.
type Approvals struct {
	TTL        time.Duration
	MaxPending int
}

// Receipts configure the receipts writer.
type Receipts struct {
	// Stdout copies every receipt to stdout (HTTP transport only).
	Stdout bool
}

// Incident configures the incident state.
type Incident struct {
	// Persist keeps the state under state_dir/incident.
	Persist bool
}

// Admin configures the operator API; it is mounted when TokenEnv or Claim
// is set.
type Admin struct {
	TokenEnv string
	Claim    *AdminClaim
}

// AdminClaim is the JWT claim that makes a principal an administrator.
type AdminClaim struct {
	Name  string `json:"name" yaml:"name"`
	Value string `json:"value" yaml:"value"`
}

// Enabled reports whether the admin API is configured.
func (a Admin) Enabled() bool { return a.TokenEnv != "" || a.Claim != nil }

// Principal is the capability constraints of one principal.
type Principal struct {
	// ReadOnly confines the principal to tools a registry classifies read
	// (spec 000 capability.constraints.read_only).
	ReadOnly bool
}

// Listen is where quiver serves its client.
type Listen struct {
	Transport Transport
	// Addr is host:port for TransportHTTP.
	Addr string
	// Path is the URL path of the MCP endpoint for TransportHTTP.
	Path string
	// TLS, when not nil, serves HTTPS with these absolute file paths.
	TLS *TLS
	// AllowedHosts are accepted Host header values (empty: the runtime's
	// default for Addr).
	AllowedHosts []string
	// AllowedOrigins are accepted browser Origin header values.
	AllowedOrigins []string
	// SessionIdleTimeout closes an HTTP session that sent no request for
	// this long, releasing what it holds (per-client upstream sessions,
	// subscriptions); 0 keeps idle sessions open.
	SessionIdleTimeout time.Duration
}

// TLS names a certificate chain and its private key (absolute paths).
type TLS struct {
	Cert string
	Key  string
}

// Upstream is one MCP server behind quiver. Exactly one of Command, URL,
// SSE and Catalog is set.
type Upstream struct {
	// Name is the server_id; Namespace derives the tool_id namespace.
	Name string
	// Command is the argv of a stdio server (no shell).
	Command []string
	// URL is a streamable HTTP endpoint.
	URL string
	// SSE is a legacy HTTP+SSE endpoint.
	SSE string
	// Catalog is the absolute path of a static catalog file.
	Catalog string
	// Env is extra environment for a command upstream; a value of the form
	// ${NAME} is a reference resolved by ResolveEnv.
	Env map[string]string
	// Dir is the absolute working directory of a command upstream (default:
	// the configuration file's directory); "" for other transports.
	Dir         string
	TrustLevel  TrustLevel
	Risk        Risk
	Credentials Credentials
	// ConnectTimeout bounds start-up and the MCP handshake.
	ConnectTimeout time.Duration
	// CallTimeout bounds one call.
	CallTimeout time.Duration
	// ToolPrefix prefixes this upstream's tool names where they are listed
	// by name; the default is Namespace()+"__" (the namespace cut so that
	// the prefix is at most 64 characters), and "" means no prefix.
	ToolPrefix string
	// Sessions is how this upstream's MCP sessions map to downstream
	// sessions: SessionsShared (default) or SessionsPerClient, for a
	// command, url or sse upstream; "" for a catalog upstream, which has
	// no session.
	Sessions SessionMode
	// Enabled false keeps the entry without starting or listing it.
	Enabled bool
	// Workspace, when set, confines the path arguments of this upstream's
	// tools (spec 001 MUST 7).
	Workspace *Workspace
	// Egress, when set, confines the URL arguments of this upstream's
	// tools to an allowlist of hosts (spec 001 MUST 7).
	Egress *Egress
}

// Workspace confines path arguments to directories. Paths are cleaned
// lexically; symlinks are not resolved, so the upstream process must not
// be trusted to follow them (that needs a sandbox).
type Workspace struct {
	// Roots are absolute directories (relative ones in the file are
	// resolved against its directory); relative path arguments are taken
	// relative to the first.
	Roots []string
	// PathArgs are the argument keys holding paths (case-insensitive);
	// DefaultPathArgs when the file gives none.
	PathArgs []string
}

// DefaultPathArgs are the argument keys a workspace guard checks when its
// path_args are not given.
func DefaultPathArgs() []string {
	return []string{"path", "paths", "file", "files", "filename", "source", "destination", "dir", "directory", "root", "target"}
}

// Egress is an allowlist of network destinations for URL arguments.
type Egress struct {
	// Allow holds host names, "*."-prefixed suffixes and IP literals,
	// optionally with ":port" (lower case).
	Allow []string
	// URLArgs, when set, restricts the check to these argument keys;
	// nil checks every string argument that is a URL.
	URLArgs []string
}

// Credentials name where the credentials of a url or sse upstream come
// from. They never hold a secret themselves.
type Credentials struct {
	// BearerEnv names the environment variable holding a bearer token.
	BearerEnv string
	// BearerFile is the absolute path of a file holding a bearer token.
	BearerFile string
	// HeadersEnv maps a header name to the environment variable holding
	// its value.
	HeadersEnv map[string]string
	// TokenExchange, when set, exchanges each caller's verified token for
	// one bound to this upstream (RFC 8693); exclusive with BearerEnv and
	// BearerFile.
	TokenExchange *TokenExchange
}

// IsZero reports whether no credential is configured.
func (c Credentials) IsZero() bool {
	return c.BearerEnv == "" && c.BearerFile == "" && len(c.HeadersEnv) == 0 && c.TokenExchange == nil
}

// Values of TokenExchange.Subject and TokenExchange.SubjectTokenType.
const (
	// SubjectCaller: the subject token is the caller's verified bearer
	// token.
	SubjectCaller = "caller"
	// SubjectTokenAccessToken and SubjectTokenJWT name the RFC 8693
	// subject_token_type sent (urn:ietf:params:oauth:token-type:...).
	SubjectTokenAccessToken = "access_token"
	SubjectTokenJWT         = "jwt"
)

// TokenExchange configures RFC 8693 token exchange for one upstream. It
// names secrets by environment variable only.
type TokenExchange struct {
	// TokenURL is the authorization server's token endpoint (https, or
	// http on a loopback host).
	TokenURL string
	// ClientID identifies quiver to the token endpoint (HTTP Basic).
	ClientID string
	// ClientSecretEnv names the environment variable holding the client
	// secret.
	ClientSecretEnv string
	// Audience is the audience requested (default: the upstream's URL).
	Audience string
	// Scope is the optional scope requested.
	Scope string
	// Subject is whose token is exchanged: always SubjectCaller.
	Subject string
	// SubjectTokenType is SubjectTokenAccessToken (default) or
	// SubjectTokenJWT.
	SubjectTokenType string
	// GatewayTokenEnv, when set, names the environment variable holding
	// quiver's own subject token, exchanged the same way for the requests
	// no caller is bound to (handshake, listings, pings). Without it those
	// requests carry no Authorization header.
	GatewayTokenEnv string
}

// Browse configures tool_browse.
type Browse struct {
	// TopK is the default and largest number of cards per answer (1..50).
	TopK int
	// CacheStable turns on the cache-stable ordering of spec 003 §5.
	CacheStable bool
	// MaxChildren is the page size of a path node's children.
	MaxChildren int
}

// Firewall configures the result firewall.
type Firewall struct {
	// MaxInlineTokens is the largest result returned inline.
	MaxInlineTokens int
	// Enabled false returns every result inline.
	Enabled bool
	// OffFor holds tool_id or tool name globs: results of matching tools
	// are returned inline whatever their size (the firewall does not apply
	// to them).
	OffFor []string
}

// Artifacts bounds the artifact store.
type Artifacts struct {
	TTL      time.Duration
	MaxBytes int64
}

// Retry is the retry policy of spec 003 §4.5; MaxAttempts 1 disables it.
type Retry struct {
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	Jitter      bool
	// RetryableCodes are the spec 003 §3.4 error codes that are retried.
	RetryableCodes []string
}

// Cache is the read-only response cache of spec 003 §4.5.
type Cache struct {
	// ReadOnly turns the cache on for tools that declare readOnlyHint.
	ReadOnly   bool
	TTL        time.Duration
	MaxEntries int
	// Allow restricts caching to these tool_id globs (empty: every
	// read-only tool).
	Allow []string
}

// RateLimit holds the limits of one scope; 0 means unlimited.
type RateLimit struct {
	// MaxCallsPerMinute bounds calls in any sliding 60-second window.
	MaxCallsPerMinute int
	// MaxCallsPerSession bounds calls in one session.
	MaxCallsPerSession int
}

// Expose configures direct exposure.
type Expose struct {
	// Direct holds tool_id or tool name globs listed with real schemas.
	Direct []string
}

// SchemaLimits bound upstream tool schemas (spec 003 §4.4).
type SchemaLimits struct {
	// Strict rejects the catalog on any schema error.
	Strict        bool
	MaxBytes      int64
	MaxDepth      int
	MaxProperties int
}

// Log configures the server log.
type Log struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is text or json.
	Format string
}

// SlogLevel returns Level as a slog.Level (info when unrecognised).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Namespace returns the tool_id namespace of the upstream: its name
// lower-cased with every run of other characters mapped to '-'
// (toolid.Namespace).
func (u *Upstream) Namespace() string { return toolid.Namespace(u.Name) }

// Transport names the upstream's transport: "command", "url", "sse" or
// "catalog" ("" when none is set).
func (u *Upstream) Transport() string {
	switch {
	case len(u.Command) > 0:
		return "command"
	case u.URL != "":
		return "url"
	case u.SSE != "":
		return "sse"
	case u.Catalog != "":
		return "catalog"
	}
	return ""
}

// Default returns a configuration with every default and no upstreams. Its
// StateDir is placed from $XDG_STATE_HOME or the home directory, and is ""
// when neither is known.
func Default() *Config {
	sd, _ := defaultStateDir()
	return &Config{
		Mode:        ModeGateway,
		Environment: EnvProd,
		Listen: Listen{
			Transport:          TransportStdio,
			Addr:               DefaultListenAddr,
			Path:               DefaultListenPath,
			SessionIdleTimeout: DefaultSessionIdleTimeout,
		},
		StateDir: sd,
		Browse:   Browse{TopK: DefaultTopK, MaxChildren: DefaultMaxChildren},
		Firewall: Firewall{MaxInlineTokens: DefaultMaxInlineTokens, Enabled: true},
		Artifacts: Artifacts{
			TTL:      DefaultArtifactTTL,
			MaxBytes: DefaultArtifactMaxBytes,
		},
		Retry: Retry{
			MaxAttempts:    DefaultRetryMaxAttempts,
			BaseDelay:      DefaultRetryBaseDelay,
			MaxDelay:       DefaultRetryMaxDelay,
			Jitter:         true,
			RetryableCodes: DefaultRetryableCodes(),
		},
		Cache: Cache{TTL: DefaultCacheTTL, MaxEntries: DefaultCacheMaxEntries},
		Schema: SchemaLimits{
			MaxBytes:      DefaultSchemaMaxBytes,
			MaxDepth:      DefaultSchemaMaxDepth,
			MaxProperties: DefaultSchemaMaxProperty,
		},
		Auth:      identity.Config{Realm: identity.DefaultRealm, MaxTokenBytes: identity.DefaultMaxTokenBytes},
		Policy:    Policy{WatchInterval: DefaultPolicyWatchInterval},
		Approvals: Approvals{TTL: DefaultApprovalTTL, MaxPending: DefaultApprovalMaxPending},
		Incident:  Incident{Persist: true},
		Log:       Log{Level: "info", Format: "text"},
	}
}

// Defaults of the safety-profile blocks.
const (
	DefaultPolicyWatchInterval = 2 * time.Second
	DefaultApprovalTTL         = 15 * time.Minute
	DefaultApprovalMaxPending  = 100
)

// defaultUpstream returns an upstream named name with every default but
// its transport, working directory and session mode (which depend on the
// transport).
func defaultUpstream(name string) Upstream {
	return Upstream{
		Name:           name,
		TrustLevel:     TrustUnknown,
		Risk:           RiskHigh,
		ConnectTimeout: DefaultConnectTimeout,
		CallTimeout:    DefaultCallTimeout,
		ToolPrefix:     defaultToolPrefix(name),
		Enabled:        true,
	}
}

// toolPrefixSep ends a default tool_prefix.
const toolPrefixSep = "__"

// maxToolPrefix is the longest tool_prefix (as the schema's pattern).
const maxToolPrefix = 64

// defaultToolPrefix is the namespace of name followed by "__", at most 64
// characters: a longer namespace is cut (and any '_' or '-' it then ends
// with trimmed).
func defaultToolPrefix(name string) string {
	ns := toolid.Namespace(name)
	if n := maxToolPrefix - len(toolPrefixSep); len(ns) > n {
		ns = strings.TrimRight(ns[:n], "_-")
	}
	if ns == "" {
		return ""
	}
	return ns + toolPrefixSep
}

// FromCatalog returns the configuration of `quiver serve --catalog FILE`
// without a configuration file: Default in environment dev, plus one static
// upstream whose
// catalog is path (made absolute) and whose name is the file's base name
// without its last extension ("tools.jsonl" -> "tools"), cut to 64 bytes.
// When nothing of that name fits a namespace (for example "日本.json") the
// upstream is named "catalog". Dir is the catalog's directory. Whether the
// file exists is left to the runtime.
func FromCatalog(path string) *Config {
	c := Default()
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	base := filepath.Base(abs)
	name := strings.TrimSuffix(base, filepath.Ext(base))
	if len(name) > 64 {
		name = strings.ToValidUTF8(name[:64], "")
	}
	name = strings.TrimSpace(name)
	if toolid.Namespace(name) == "" {
		name = "catalog"
	}
	u := defaultUpstream(name)
	u.Catalog = abs
	c.Dir = filepath.Dir(abs)
	// A static catalog dispatches nothing real and comes with no registry:
	// its tools are unclassified, which prod would deny.
	c.Environment = EnvDev
	c.Upstreams = []Upstream{u}
	return c
}

// defaultStateDir is $XDG_STATE_HOME/quiver when XDG_STATE_HOME is an
// absolute path, else ~/.local/state/quiver.
func defaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "quiver"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "quiver"), nil
}
