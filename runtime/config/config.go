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
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/units"
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

// DefaultMaxSessionsPerPrincipal and DefaultMaxSessions bound the MCP
// sessions of an HTTP listener: far below what a flood opens (15,000 in
// 20 s), far above what one agent needs.
const (
	DefaultMaxSessionsPerPrincipal = 64
	DefaultMaxSessions             = 1024
)

// Default values of settings that are not a zero value.
const (
	DefaultListenAddr         = "127.0.0.1:8080"
	DefaultListenPath         = "/mcp"
	DefaultConnectTimeout     = units.Duration(10 * time.Second)
	DefaultCallTimeout        = units.Duration(60 * time.Second)
	DefaultSessionIdleTimeout = units.Duration(5 * time.Minute)
	DefaultMRTRHold           = units.Duration(time.Minute)
	DefaultTopK               = 10
	DefaultMaxChildren        = 20
	DefaultMaxInlineTokens    = 800
	DefaultArtifactTTL        = units.Duration(24 * time.Hour)
	DefaultArtifactMaxBytes   = units.Size(1) << 30
	DefaultRetryMaxAttempts   = 1
	DefaultRetryBaseDelay     = units.Duration(100 * time.Millisecond)
	DefaultRetryMaxDelay      = units.Duration(2 * time.Second)
	DefaultCacheTTL           = units.Duration(60 * time.Second)
	DefaultCacheMaxEntries    = 256
	DefaultSchemaMaxBytes     = units.Size(256) << 10 // as catalog.DefaultSchemaLimits
	DefaultSchemaMaxDepth     = 32                    // as catalog.DefaultSchemaLimits
	DefaultSchemaMaxProperty  = 2048                  // as catalog.DefaultSchemaLimits
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
	Source string `json:"-" yaml:"-"`
	// Dir is the absolute directory relative paths were resolved against.
	// It is not part of Effective.
	Dir string `json:"-" yaml:"-"`

	Mode        Mode              `json:"mode" yaml:"mode"`
	Environment guard.Environment `json:"environment" yaml:"environment"`
	Listen      Listen            `json:"listen" yaml:"listen"`
	// StateDir is the absolute state directory (artifacts, idempotency
	// records, receipts); "" only when neither $XDG_STATE_HOME nor the home
	// directory is known (Default, FromCatalog).
	StateDir string `json:"state_dir" yaml:"state_dir"`
	// State chooses where the state shared by every quiver process and
	// replica lives (idempotency records, incident state, approvals, rate
	// limit windows, caches, artifacts).
	State     State      `json:"state" yaml:"state"`
	Upstreams []Upstream `json:"upstreams" yaml:"upstreams"`
	// Registry holds absolute glob paths of tool_registry manifests.
	Registry []string `json:"registry" yaml:"registry"`
	Browse   Browse   `json:"browse" yaml:"browse"`
	Firewall Firewall `json:"firewall" yaml:"firewall"`
	// Artifacts bounds the artifact store.
	Artifacts Artifacts `json:"artifacts" yaml:"artifacts"`
	Retry     Retry     `json:"retry" yaml:"retry"`
	Cache     Cache     `json:"cache" yaml:"cache"`
	// RateLimits maps a meta-tool name (tool_browse, tool_execute,
	// tool_view, tool_hydrate) or "tool:<tool_id glob>" to its limits.
	RateLimits map[string]RateLimit `json:"rate_limits" yaml:"rate_limits"`
	Expose     Expose               `json:"expose" yaml:"expose"`
	// Schema bounds upstream tool schemas at ingest.
	Schema SchemaLimits `json:"schema" yaml:"schema"`
	// TolerantArgs turns on the argument repairs of spec 003 §4.4.
	TolerantArgs bool `json:"tolerant_args" yaml:"tolerant_args"`
	// StrictArgs refuses argument names a tool's input schema does not
	// declare (argguard.Strict); the file's default is true in environment
	// prod and false in dev. Upstream.StrictArgs overrides it.
	StrictArgs bool `json:"strict_args" yaml:"strict_args"`
	// Insecure accepts plain HTTP off loopback (serve --insecure sets it
	// too): url and sse upstreams over http:// (CheckTransport), and an
	// HTTP listener without TLS.
	Insecure bool `json:"insecure" yaml:"insecure"`
	// Principals holds capability constraints by principal name: the stdio
	// principal (the process owner's user name), or "*" for every principal
	// not named (HTTP sessions until they authenticate).
	Principals map[string]Principal `json:"principals" yaml:"principals"`
	// Auth is who may call quiver: JWT issuers over HTTP, the local
	// principal over stdio (spec 001 MUST 2).
	Auth identity.Config `json:"auth" yaml:"auth"`
	// Policy is the policy file; File "" means no policy (allow all).
	Policy Policy `json:"policy,omitzero" yaml:"policy,omitempty"`
	// Approvals configure the approval store.
	Approvals Approvals `json:"approvals" yaml:"approvals"`
	// Capabilities configure the capability tokens of spec 004.
	Capabilities Capabilities `json:"capabilities" yaml:"capabilities"`
	// Receipts configure the audit receipts (state_dir/receipts).
	Receipts Receipts `json:"receipts" yaml:"receipts"`
	// Incident configures the incident-mode state.
	Incident Incident `json:"incident" yaml:"incident"`
	// Admin configures the operator API (/admin/v1/).
	Admin Admin `json:"admin" yaml:"admin"`
	Log   Log   `json:"log" yaml:"log"`

	// Imported is set when the file was an MCP client's configuration
	// (LoadWith). It is not part of Effective.
	Imported *Imported `json:"-" yaml:"-"`

	// Timing holds the runtime's timings that the file does not set: their
	// defaults serve in production, tests shorten them. It is not part of
	// Effective.
	Timing Timing `json:"-" yaml:"-"`
}

// Timing bounds the runtime's waits.
type Timing struct {
	// ReadyTimeout bounds how long Start waits for the upstreams before it
	// publishes the first catalog; slower upstreams join it when they
	// come up.
	ReadyTimeout time.Duration
	// CallTimeout bounds one dispatch to an upstream, on top of the
	// upstream's own call_timeout.
	CallTimeout time.Duration
	// RefreshInterval re-lists every upstream periodically; 0 re-lists
	// only on list_changed notifications and reconnects.
	RefreshInterval time.Duration
}

// DefaultTiming returns the timings of a running quiver.
func DefaultTiming() Timing {
	return Timing{ReadyTimeout: DefaultReadyTimeout, CallTimeout: time.Duration(DefaultCallTimeout)}
}

// DefaultReadyTimeout is Timing.ReadyTimeout's default.
const DefaultReadyTimeout = 10 * time.Second

// Policy names the policy file and how often it is re-read.
type Policy struct {
	// File is the absolute path of the policy file; "" for none.
	File          string         `json:"file" yaml:"file"`
	WatchInterval units.Duration `json:"watch_interval" yaml:"watch_interval"`
}

// IsZero reports whether no policy file is configured; the effective
// settings then leave the policy block out.
func (p Policy) IsZero() bool { return p.File == "" }

// Approvals bound the approval store.
type Approvals struct {
	TTL        units.Duration `json:"ttl" yaml:"ttl"`
	MaxPending int            `json:"max_pending" yaml:"max_pending"`
}

// Capabilities configure capability tokens (spec 004): who signs them, for
// how long they may live, and the proof-of-possession window.
type Capabilities struct {
	// Issuer is the iss of the tokens this gateway signs and accepts; every
	// replica of one fleet uses the same.
	Issuer string `json:"issuer" yaml:"issuer"`
	// KeyFile is the absolute path of the signing keyring (Ed25519 private
	// JWKs, mode 0600); "" keeps it in state_dir/capability-keys.json.
	// Replicas share one keyring by pointing at the same file.
	KeyFile string `json:"key_file,omitempty" yaml:"key_file,omitempty"`
	// DefaultDuration is the life of a token whose request names none;
	// MaxDuration caps every token's life.
	DefaultDuration units.Duration `json:"default_duration" yaml:"default_duration"`
	MaxDuration     units.Duration `json:"max_duration" yaml:"max_duration"`
	// ProofWindow bounds how far a proof's iat may be from the clock.
	ProofWindow units.Duration `json:"proof_window" yaml:"proof_window"`
}

// Receipts configure the receipts writer.
type Receipts struct {
	// Stdout copies every receipt to stdout (HTTP transport only).
	Stdout bool `json:"stdout" yaml:"stdout"`
}

// Incident configures the incident state.
type Incident struct {
	// Persist keeps the state in the state backend, shared by every
	// process and replica; false keeps it in this process's memory only.
	Persist bool `json:"persist" yaml:"persist"`
	// Quarantine sets the auto-quarantine thresholds.
	Quarantine Quarantine `json:"quarantine" yaml:"quarantine"`
}

// Quarantine quarantines a principal refused Denials times within
// Window; Denials 0 is off.
type Quarantine struct {
	Denials int            `json:"denials" yaml:"denials"`
	Window  units.Duration `json:"window" yaml:"window"`
}

// Defaults of auto-quarantine.
const (
	DefaultQuarantineDenials = 50
	DefaultQuarantineWindow  = units.Duration(time.Minute)
)

// StateBackend names a state backend.
type StateBackend string

// State backends.
const (
	// StateEmbedded keeps the state under state_dir, shared by every
	// quiver process of the machine that uses the same state_dir.
	StateEmbedded StateBackend = "embedded"
	// StateRedis keeps the state in a Redis server shared by replicas.
	StateRedis StateBackend = "redis"
)

// DefaultRedisKeyPrefix prefixes every key quiver writes to Redis.
const DefaultRedisKeyPrefix = "quiver:"

// State chooses the state backend.
type State struct {
	Backend StateBackend `json:"backend" yaml:"backend"`
	// Redis configures the redis backend; its URL is required with it.
	Redis Redis `json:"redis,omitzero" yaml:"redis,omitempty"`
}

// Redis is how quiver reaches its Redis server.
type Redis struct {
	// URL is redis://[user@]host:port/db or rediss:// (TLS); it carries
	// no password (see PasswordEnv).
	URL string `json:"url" yaml:"url"`
	// PasswordEnv names the environment variable that holds the password;
	// it is resolved at start (ResolvePassword).
	PasswordEnv string `json:"password_env,omitempty" yaml:"password_env,omitempty"`
	// TLS configures TLS toward the server (with rediss:// URLs).
	TLS RedisTLS `json:"tls,omitzero" yaml:"tls,omitempty"`
	// KeyPrefix prefixes every key (default DefaultRedisKeyPrefix), so
	// that several fleets can share one server.
	KeyPrefix string `json:"key_prefix" yaml:"key_prefix"`
}

// RedisTLS configures TLS toward the Redis server.
type RedisTLS struct {
	// CAFile is the absolute path of a PEM bundle of the CAs to trust
	// (default: the system's).
	CAFile string `json:"ca_file,omitempty" yaml:"ca_file,omitempty"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `json:"server_name,omitempty" yaml:"server_name,omitempty"`
}

// IsZero reports whether no TLS setting is made.
func (t RedisTLS) IsZero() bool { return t.CAFile == "" && t.ServerName == "" }

// ErrRedisPassword is returned by ResolvePassword for a password_env that
// names an unset variable.
var ErrRedisPassword = errors.New("state.redis.password_env: environment variable is not set")

// ResolvePassword returns the Redis password from the environment: "" when
// no password_env is set, an error matching ErrRedisPassword when it
// names an unset or empty variable. The value never appears in errors.
func (r Redis) ResolvePassword(getenv func(string) (string, bool)) (string, error) {
	if r.PasswordEnv == "" {
		return "", nil
	}
	v, ok := getenv(r.PasswordEnv)
	if !ok || v == "" {
		return "", fmt.Errorf("%w: %s", ErrRedisPassword, r.PasswordEnv)
	}
	return v, nil
}

// Admin configures the operator API; it is mounted when TokenEnv or Claim
// is set.
type Admin struct {
	TokenEnv string      `json:"token_env,omitempty" yaml:"token_env,omitempty"`
	Claim    *AdminClaim `json:"claim,omitempty" yaml:"claim,omitempty"`
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
	ReadOnly bool `json:"read_only" yaml:"read_only"`
	// Permissions are granted to the principal for tools whose manifest
	// requires some (cli tools), on top of its token's.
	Permissions []string `json:"permissions,omitempty" yaml:"permissions,omitempty,flow"`
}

// CLI is a cli upstream: tool manifests and the commands they may name.
type CLI struct {
	// Manifests are absolute globs of the tool manifests (relative ones
	// in the file are relative to its directory).
	Manifests []string `json:"manifests" yaml:"manifests,flow"`
	// AllowedCommands are the only commands manifests may name.
	AllowedCommands []string `json:"allowed_commands" yaml:"allowed_commands,flow"`
}

// Listen is where quiver serves its client.
type Listen struct {
	Transport Transport `json:"transport" yaml:"transport"`
	// Addr is host:port for TransportHTTP.
	Addr string `json:"addr" yaml:"addr"`
	// Path is the URL path of the MCP endpoint for TransportHTTP.
	Path string `json:"path" yaml:"path"`
	// TLS, when not nil, serves HTTPS with these absolute file paths.
	TLS *TLS `json:"tls,omitempty" yaml:"tls,omitempty"`
	// AllowedHosts are accepted Host header values (empty: the runtime's
	// default for Addr).
	AllowedHosts []string `json:"allowed_hosts" yaml:"allowed_hosts"`
	// AllowedOrigins are accepted browser Origin header values.
	AllowedOrigins []string `json:"allowed_origins" yaml:"allowed_origins"`
	// SessionIdleTimeout closes an HTTP session that sent no request for
	// this long, releasing what it holds (per-client upstream sessions,
	// subscriptions); 0 keeps idle sessions open.
	SessionIdleTimeout units.Duration `json:"session_idle_timeout" yaml:"session_idle_timeout"`
	// Sessions bounds the MCP sessions held at once (transport http).
	Sessions Sessions `json:"sessions" yaml:"sessions"`
	// MetricsTokenEnv, when set, names the environment variable holding a
	// bearer token for /metrics and the detail of /healthz (the admin
	// token opens them too); /metrics then refuses requests without one.
	MetricsTokenEnv string `json:"metrics_token_env,omitempty" yaml:"metrics_token_env,omitempty"`
	// ReadyTimeout bounds how long, after start, requests that read the
	// catalog wait for every upstream to come up (or fail) before the
	// first catalog is served from what is ready; Load copies it into
	// Timing.ReadyTimeout.
	ReadyTimeout units.Duration `json:"ready_timeout" yaml:"ready_timeout"`
	// MRTRHold is how long an upstream call of a sessionless client
	// (protocol 2026-07-28) waits for the client's retry when the upstream
	// asked for input in the middle of the call (protocol 2025-11-25 or
	// older); the call is cancelled after it.
	MRTRHold units.Duration `json:"mrtr_hold" yaml:"mrtr_hold"`
}

// Sessions bounds the MCP sessions (protocol 2025-11-25 and older) and
// sessionless requests in flight (2026-07-28) an HTTP listener holds: per
// principal (a verified token's principal, or an anonymous caller's remote
// address) and in total.
type Sessions struct {
	MaxPerPrincipal int `json:"max_per_principal" yaml:"max_per_principal"`
	MaxTotal        int `json:"max_total" yaml:"max_total"`
}

// TLS names a certificate chain and its private key (absolute paths).
type TLS struct {
	Cert string `json:"cert" yaml:"cert"`
	Key  string `json:"key" yaml:"key"`
}

// Upstream is one MCP server behind quiver. Exactly one of Command, URL,
// SSE and Catalog is set.
type Upstream struct {
	// Name is the server_id; Namespace derives the tool_id namespace.
	Name string `json:"name" yaml:"name"`
	// Command is the argv of a stdio server (no shell).
	Command []string `json:"command,omitempty" yaml:"command,omitempty,flow"`
	// URL is a streamable HTTP endpoint.
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// SSE is a legacy HTTP+SSE endpoint.
	SSE string `json:"sse,omitempty" yaml:"sse,omitempty"`
	// Catalog is the absolute path of a static catalog file.
	Catalog string `json:"catalog,omitempty" yaml:"catalog,omitempty"`
	// CLI, when set, makes this a cli upstream: governed command-line
	// tools from manifests (runtime/upstream/cli).
	CLI *CLI `json:"cli,omitempty" yaml:"cli,omitempty"`
	// OutputPolicies are output policies by tool name glob (path.Match
	// syntax over the upstream's own tool names): field-path glob ->
	// allow, mask or redact (runtime/outpolicy).
	OutputPolicies map[string]map[string]string `json:"output_policies,omitempty" yaml:"output_policies,omitempty"`
	// Env is extra environment for a command upstream; a value of the form
	// ${NAME} is a reference resolved by ResolveEnv.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// Dir is the absolute working directory of a command upstream (default:
	// the configuration file's directory); "" for other transports.
	Dir         string      `json:"dir,omitempty" yaml:"dir,omitempty"`
	TrustLevel  TrustLevel  `json:"trust_level" yaml:"trust_level"`
	Risk        Risk        `json:"risk" yaml:"risk"`
	Credentials Credentials `json:"credentials,omitzero" yaml:"credentials,omitempty"`
	// ConnectTimeout bounds start-up and the MCP handshake.
	ConnectTimeout units.Duration `json:"connect_timeout" yaml:"connect_timeout"`
	// CallTimeout bounds one call.
	CallTimeout units.Duration `json:"call_timeout" yaml:"call_timeout"`
	// ToolPrefix prefixes this upstream's tool names where they are listed
	// by name; the default is Namespace()+"__" (the namespace cut so that
	// the prefix is at most 64 characters), and "" means no prefix.
	ToolPrefix string `json:"tool_prefix" yaml:"tool_prefix"`
	// Sessions is how this upstream's MCP sessions map to downstream
	// sessions: SessionsShared (default) or SessionsPerClient, for a
	// command, url or sse upstream; "" for a catalog upstream, which has
	// no session.
	Sessions SessionMode `json:"sessions,omitempty" yaml:"sessions,omitempty"`
	// Protocol, when set, is the newest MCP revision quiver offers this
	// upstream ("" = the newest the go-sdk speaks). A server that sends
	// requests in the middle of a call, which 2026-07-28 forbids, keeps
	// doing so at 2025-11-25.
	Protocol string `json:"protocol" yaml:"protocol"`
	// Enabled false keeps the entry without starting or listing it.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// StrictArgs, when set, overrides Config.StrictArgs for this
	// upstream's tools.
	StrictArgs *bool `json:"strict_args,omitempty" yaml:"strict_args,omitempty"`
	// Workspace, when set, confines the path arguments of this upstream's
	// tools (spec 001 MUST 7).
	Workspace *Workspace `json:"workspace,omitempty" yaml:"workspace,omitempty"`
	// Egress, when set, confines the URL arguments of this upstream's
	// tools to an allowlist of hosts (spec 001 MUST 7).
	Egress *Egress `json:"egress,omitempty" yaml:"egress,omitempty"`
	// Sandbox, when set, isolates a command upstream (spec 001 MUST 8;
	// see sandbox.go). Environment prod refuses a command upstream
	// without one.
	Sandbox *Sandbox `json:"sandbox,omitempty" yaml:"sandbox,omitempty"`
}

// Workspace confines path arguments to directories. Paths are cleaned
// lexically; symlinks are not resolved, so the upstream process must not
// be trusted to follow them (that needs a sandbox).
type Workspace struct {
	// Roots are absolute directories (relative ones in the file are
	// resolved against its directory); relative path arguments are taken
	// relative to the first.
	Roots []string `json:"roots" yaml:"roots,flow"`
	// PathArgs are the argument keys holding paths (case-insensitive);
	// DefaultPathArgs when the file gives none.
	PathArgs []string `json:"path_args" yaml:"path_args,flow"`
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
	Allow []string `json:"allow" yaml:"allow,flow"`
	// URLArgs, when set, restricts the check to these argument keys;
	// nil checks every string argument that is a URL.
	URLArgs []string `json:"url_args,omitempty" yaml:"url_args,omitempty,flow"`
}

// Credentials name where the credentials of a url or sse upstream come
// from. They never hold a secret themselves.
type Credentials struct {
	// BearerEnv names the environment variable holding a bearer token.
	BearerEnv string `json:"bearer_env,omitempty" yaml:"bearer_env,omitempty"`
	// BearerFile is the absolute path of a file holding a bearer token.
	BearerFile string `json:"bearer_file,omitempty" yaml:"bearer_file,omitempty"`
	// HeadersEnv maps a header name to the environment variable holding
	// its value.
	HeadersEnv map[string]string `json:"headers_env,omitempty" yaml:"headers_env,omitempty"`
	// TokenExchange, when set, exchanges each caller's verified token for
	// one bound to this upstream (RFC 8693); exclusive with BearerEnv and
	// BearerFile.
	TokenExchange *TokenExchange `json:"token_exchange,omitempty" yaml:"token_exchange,omitempty"`
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
	TokenURL string `json:"token_url" yaml:"token_url"`
	// ClientID identifies quiver to the token endpoint (HTTP Basic).
	ClientID string `json:"client_id" yaml:"client_id"`
	// ClientSecretEnv names the environment variable holding the client
	// secret.
	ClientSecretEnv string `json:"client_secret_env" yaml:"client_secret_env"`
	// Audience is the audience requested (default: the upstream's URL).
	Audience string `json:"audience" yaml:"audience"`
	// Scope is the optional scope requested.
	Scope string `json:"scope,omitempty" yaml:"scope,omitempty"`
	// Subject is whose token is exchanged: always SubjectCaller.
	Subject string `json:"subject" yaml:"subject"`
	// SubjectTokenType is SubjectTokenAccessToken (default) or
	// SubjectTokenJWT.
	SubjectTokenType string `json:"subject_token_type" yaml:"subject_token_type"`
	// GatewayTokenEnv, when set, names the environment variable holding
	// quiver's own subject token, exchanged the same way for the requests
	// no caller is bound to (handshake, listings, pings). Without it those
	// requests carry no Authorization header.
	GatewayTokenEnv string `json:"gateway_token_env,omitempty" yaml:"gateway_token_env,omitempty"`
}

// Browse configures tool_browse.
type Browse struct {
	// TopK is the default and largest number of cards per answer (1..50).
	TopK int `json:"top_k" yaml:"top_k"`
	// CacheStable turns on the cache-stable ordering of spec 003 §5.
	CacheStable bool `json:"cache_stable" yaml:"cache_stable"`
	// MaxChildren is the page size of a path node's children.
	MaxChildren int `json:"max_children" yaml:"max_children"`
}

// Firewall configures the result firewall.
type Firewall struct {
	// MaxInlineTokens is the largest result returned inline.
	MaxInlineTokens int `json:"max_inline_tokens" yaml:"max_inline_tokens"`
	// Enabled false returns every result inline.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// OffFor holds tool_id or tool name globs: results of matching tools
	// are returned inline whatever their size (the firewall does not apply
	// to them).
	OffFor []string `json:"off_for" yaml:"off_for"`
}

// Artifacts bounds the artifact store.
type Artifacts struct {
	TTL      units.Duration `json:"ttl" yaml:"ttl"`
	MaxBytes units.Size     `json:"max_bytes" yaml:"max_bytes"`
}

// Retry is the retry policy of spec 003 §4.5; MaxAttempts 1 disables it.
type Retry struct {
	MaxAttempts int            `json:"max_attempts" yaml:"max_attempts"`
	BaseDelay   units.Duration `json:"base_delay" yaml:"base_delay"`
	MaxDelay    units.Duration `json:"max_delay" yaml:"max_delay"`
	Jitter      bool           `json:"jitter" yaml:"jitter"`
	// RetryableCodes are the spec 003 §3.4 error codes that are retried.
	RetryableCodes []string `json:"retryable_codes" yaml:"retryable_codes,flow"`
}

// Cache is the read-only response cache of spec 003 §4.5.
type Cache struct {
	// ReadOnly turns the cache on for tools that declare readOnlyHint.
	ReadOnly   bool           `json:"read_only" yaml:"read_only"`
	TTL        units.Duration `json:"ttl" yaml:"ttl"`
	MaxEntries int            `json:"max_entries" yaml:"max_entries"`
	// Allow restricts caching to these tool_id globs (empty: every
	// read-only tool).
	Allow []string `json:"allow" yaml:"allow"`
}

// RateLimit holds the limits of one scope; 0 means unlimited.
type RateLimit struct {
	// MaxCallsPerMinute bounds calls in any sliding 60-second window.
	MaxCallsPerMinute int `json:"max_calls_per_minute,omitempty" yaml:"max_calls_per_minute,omitempty"`
	// MaxCallsPerSession bounds calls in one session.
	MaxCallsPerSession int `json:"max_calls_per_session,omitempty" yaml:"max_calls_per_session,omitempty"`
}

// Expose configures direct exposure.
type Expose struct {
	// Direct holds tool_id or tool name globs listed with real schemas.
	Direct []string `json:"direct" yaml:"direct"`
}

// SchemaLimits bound upstream tool schemas (spec 003 §4.4).
type SchemaLimits struct {
	// Strict rejects the catalog on any schema error.
	Strict        bool       `json:"strict" yaml:"strict"`
	MaxBytes      units.Size `json:"max_bytes" yaml:"max_bytes"`
	MaxDepth      int        `json:"max_depth" yaml:"max_depth"`
	MaxProperties int        `json:"max_properties" yaml:"max_properties"`
}

// Log configures the server log.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `json:"level" yaml:"level"`
	// Format is text or json.
	Format string `json:"format" yaml:"format"`
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

// Strict reports whether strict_args holds for this upstream under cfg.
func (u *Upstream) Strict(cfg *Config) bool {
	if u.StrictArgs != nil {
		return *u.StrictArgs
	}
	return cfg.StrictArgs
}

// Transport names the upstream's transport: "command", "url", "sse" or
// "catalog" ("" when none is set).
func (u *Upstream) Transport() string {
	switch {
	case u.CLI != nil:
		return "cli"
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
		Environment: guard.EnvProd,
		Listen: Listen{
			Transport:          TransportStdio,
			Addr:               DefaultListenAddr,
			Path:               DefaultListenPath,
			SessionIdleTimeout: DefaultSessionIdleTimeout,
			Sessions:           Sessions{MaxPerPrincipal: DefaultMaxSessionsPerPrincipal, MaxTotal: DefaultMaxSessions},
			ReadyTimeout:       units.Duration(DefaultReadyTimeout),
			MRTRHold:           DefaultMRTRHold,
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
		Auth:       identity.Config{Realm: identity.DefaultRealm, MaxTokenBytes: identity.DefaultMaxTokenBytes},
		Policy:     Policy{WatchInterval: DefaultPolicyWatchInterval},
		Approvals:  Approvals{TTL: DefaultApprovalTTL, MaxPending: DefaultApprovalMaxPending},
		Incident:   Incident{Persist: true, Quarantine: Quarantine{Denials: DefaultQuarantineDenials, Window: DefaultQuarantineWindow}},
		StrictArgs: true, // environment prod
		State:      State{Backend: StateEmbedded, Redis: Redis{KeyPrefix: DefaultRedisKeyPrefix}},
		Log:        Log{Level: "info", Format: "text"},
		Timing:     DefaultTiming(),

		Capabilities: Capabilities{Issuer: DefaultCapabilityIssuer, DefaultDuration: DefaultCapabilityDuration,
			MaxDuration: DefaultCapabilityMaxDuration, ProofWindow: DefaultCapabilityProofWindow},
	}
}

// Defaults of the safety-profile blocks.
const (
	DefaultPolicyWatchInterval = units.Duration(2 * time.Second)
	DefaultApprovalTTL         = units.Duration(15 * time.Minute)
	DefaultApprovalMaxPending  = 100

	DefaultCapabilityIssuer      = "quiver"
	DefaultCapabilityDuration    = units.Duration(time.Hour)
	DefaultCapabilityMaxDuration = units.Duration(24 * time.Hour)
	DefaultCapabilityProofWindow = units.Duration(60 * time.Second)
)

// NewUpstream returns an upstream entry named name with every default that
// does not depend on its transport (the tool prefix is derived from the
// name); the caller sets one of Command, URL, SSE and Catalog. It is how
// code builds the upstreams of a configuration that was not loaded.
func NewUpstream(name string) Upstream {
	var u Upstream
	u.defaults()
	u.Name, u.ToolPrefix = name, defaultToolPrefix(name)
	return u
}

// defaults sets the defaults that do not depend on the rest of the entry;
// the tool prefix (from the name), the working directory and the session
// mode (from the transport) are set once the entry is decoded
// (checker.upstreams).
func (u *Upstream) defaults() {
	*u = Upstream{
		TrustLevel:     TrustUnknown,
		Risk:           RiskHigh,
		ConnectTimeout: DefaultConnectTimeout,
		CallTimeout:    DefaultCallTimeout,
		Enabled:        true,
	}
}

// defaults sets the defaults of a token_exchange block.
func (te *TokenExchange) defaults() {
	*te = TokenExchange{Subject: SubjectCaller, SubjectTokenType: SubjectTokenAccessToken}
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
	u := NewUpstream(name)
	u.Catalog = abs
	c.Dir = filepath.Dir(abs)
	// A static catalog dispatches nothing real and comes with no registry:
	// its tools are unclassified, which prod would deny.
	c.Environment = guard.EnvDev
	c.StrictArgs = false
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
