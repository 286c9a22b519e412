package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/quiver-mcp/quiver/runtime/identity"
	yaml "go.yaml.in/yaml/v3"
)

// The eff* types are the effective configuration as written out: the same
// keys as the file, every default filled in, paths resolved, durations and
// sizes as strings. Credentials appear only as the names of environment
// variables and files.
type effConfig struct {
	Mode         string                  `yaml:"mode" json:"mode"`
	Environment  string                  `yaml:"environment" json:"environment"`
	Listen       effListen               `yaml:"listen" json:"listen"`
	StateDir     string                  `yaml:"state_dir" json:"state_dir"`
	Upstreams    []effUpstream           `yaml:"upstreams" json:"upstreams"`
	Registry     []string                `yaml:"registry" json:"registry"`
	Browse       effBrowse               `yaml:"browse" json:"browse"`
	Firewall     effFirewall             `yaml:"firewall" json:"firewall"`
	Artifacts    effArtifacts            `yaml:"artifacts" json:"artifacts"`
	Retry        effRetry                `yaml:"retry" json:"retry"`
	Cache        effCache                `yaml:"cache" json:"cache"`
	RateLimits   map[string]effRateLimit `yaml:"rate_limits" json:"rate_limits"`
	Expose       effExpose               `yaml:"expose" json:"expose"`
	Schema       effSchema               `yaml:"schema" json:"schema"`
	TolerantArgs bool                    `yaml:"tolerant_args" json:"tolerant_args"`
	Principals   map[string]effPrincipal `yaml:"principals" json:"principals"`
	Auth         effAuth                 `yaml:"auth" json:"auth"`
	Policy       *effPolicy              `yaml:"policy,omitempty" json:"policy,omitempty"`
	Approvals    effApprovals            `yaml:"approvals" json:"approvals"`
	Receipts     effReceipts             `yaml:"receipts" json:"receipts"`
	Incident     effIncident             `yaml:"incident" json:"incident"`
	Admin        effAdmin                `yaml:"admin" json:"admin"`
	Log          effLog                  `yaml:"log" json:"log"`
}

type effAuth struct {
	Realm         string      `yaml:"realm" json:"realm"`
	MaxTokenBytes int         `yaml:"max_token_bytes" json:"max_token_bytes"`
	Issuers       []effIssuer `yaml:"issuers" json:"issuers"`
	Local         effLocal    `yaml:"local" json:"local"`
}

type effLocal struct {
	Sub       string         `yaml:"sub,omitempty" json:"sub,omitempty"`
	ActorType string         `yaml:"actor_type,omitempty" json:"actor_type,omitempty"`
	OrgID     string         `yaml:"org_id,omitempty" json:"org_id,omitempty"`
	Claims    map[string]any `yaml:"claims,omitempty" json:"claims,omitempty"`
}

type effIssuer struct {
	Name             string         `yaml:"name" json:"name"`
	Issuer           string         `yaml:"iss" json:"iss"`
	Audiences        []string       `yaml:"audiences,flow" json:"audiences"`
	Alg              string         `yaml:"alg" json:"alg"`
	HS256SecretEnv   string         `yaml:"hs256_secret_env,omitempty" json:"hs256_secret_env,omitempty"`
	JWKSFile         string         `yaml:"jwks_file,omitempty" json:"jwks_file,omitempty"`
	JWKSURL          string         `yaml:"jwks_url,omitempty" json:"jwks_url,omitempty"`
	JWKSRefresh      string         `yaml:"jwks_refresh,omitempty" json:"jwks_refresh,omitempty"`
	ClockSkew        string         `yaml:"clock_skew,omitempty" json:"clock_skew,omitempty"`
	Claims           *effClaimNames `yaml:"claims,omitempty" json:"claims,omitempty"`
	DefaultActorType string         `yaml:"default_actor_type,omitempty" json:"default_actor_type,omitempty"`
}

type effClaimNames struct {
	ActorType string `yaml:"actor_type,omitempty" json:"actor_type,omitempty"`
	ClientID  string `yaml:"client_id,omitempty" json:"client_id,omitempty"`
	OrgID     string `yaml:"org_id,omitempty" json:"org_id,omitempty"`
}

type effPolicy struct {
	File          string `yaml:"file" json:"file"`
	WatchInterval string `yaml:"watch_interval" json:"watch_interval"`
}

type effApprovals struct {
	TTL        string `yaml:"ttl" json:"ttl"`
	MaxPending int    `yaml:"max_pending" json:"max_pending"`
}

type effReceipts struct {
	Stdout bool `yaml:"stdout" json:"stdout"`
}

type effIncident struct {
	Persist bool `yaml:"persist" json:"persist"`
}

type effAdmin struct {
	TokenEnv string      `yaml:"token_env,omitempty" json:"token_env,omitempty"`
	Claim    *AdminClaim `yaml:"claim,omitempty" json:"claim,omitempty"`
}

type effPrincipal struct {
	ReadOnly bool `yaml:"read_only" json:"read_only"`
}

type effListen struct {
	Transport          string   `yaml:"transport" json:"transport"`
	Addr               string   `yaml:"addr" json:"addr"`
	Path               string   `yaml:"path" json:"path"`
	TLS                *effTLS  `yaml:"tls,omitempty" json:"tls,omitempty"`
	AllowedHosts       []string `yaml:"allowed_hosts" json:"allowed_hosts"`
	AllowedOrigins     []string `yaml:"allowed_origins" json:"allowed_origins"`
	SessionIdleTimeout string   `yaml:"session_idle_timeout" json:"session_idle_timeout"`
}

type effTLS struct {
	Cert string `yaml:"cert" json:"cert"`
	Key  string `yaml:"key" json:"key"`
}

type effUpstream struct {
	Name           string            `yaml:"name" json:"name"`
	Command        []string          `yaml:"command,omitempty,flow" json:"command,omitempty"`
	URL            string            `yaml:"url,omitempty" json:"url,omitempty"`
	SSE            string            `yaml:"sse,omitempty" json:"sse,omitempty"`
	Catalog        string            `yaml:"catalog,omitempty" json:"catalog,omitempty"`
	Env            map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Dir            string            `yaml:"dir,omitempty" json:"dir,omitempty"`
	TrustLevel     string            `yaml:"trust_level" json:"trust_level"`
	Risk           string            `yaml:"risk" json:"risk"`
	Credentials    *effCredentials   `yaml:"credentials,omitempty" json:"credentials,omitempty"`
	ConnectTimeout string            `yaml:"connect_timeout" json:"connect_timeout"`
	CallTimeout    string            `yaml:"call_timeout" json:"call_timeout"`
	ToolPrefix     string            `yaml:"tool_prefix" json:"tool_prefix"`
	Sessions       string            `yaml:"sessions,omitempty" json:"sessions,omitempty"` // "" for a catalog upstream
	Enabled        bool              `yaml:"enabled" json:"enabled"`
	Workspace      *effWorkspace     `yaml:"workspace,omitempty" json:"workspace,omitempty"`
	Egress         *effEgress        `yaml:"egress,omitempty" json:"egress,omitempty"`
}

type effWorkspace struct {
	Roots    []string `yaml:"roots,flow" json:"roots"`
	PathArgs []string `yaml:"path_args,flow" json:"path_args"`
}

type effEgress struct {
	Allow []string `yaml:"allow,flow" json:"allow"`
	// URLArgs is empty when every string argument is checked.
	URLArgs []string `yaml:"url_args,omitempty,flow" json:"url_args,omitempty"`
}

type effCredentials struct {
	BearerEnv     string            `yaml:"bearer_env,omitempty" json:"bearer_env,omitempty"`
	BearerFile    string            `yaml:"bearer_file,omitempty" json:"bearer_file,omitempty"`
	HeadersEnv    map[string]string `yaml:"headers_env,omitempty" json:"headers_env,omitempty"`
	TokenExchange *effTokenExchange `yaml:"token_exchange,omitempty" json:"token_exchange,omitempty"`
}

type effTokenExchange struct {
	TokenURL         string `yaml:"token_url" json:"token_url"`
	ClientID         string `yaml:"client_id" json:"client_id"`
	ClientSecretEnv  string `yaml:"client_secret_env" json:"client_secret_env"`
	Audience         string `yaml:"audience" json:"audience"`
	Scope            string `yaml:"scope,omitempty" json:"scope,omitempty"`
	Subject          string `yaml:"subject" json:"subject"`
	SubjectTokenType string `yaml:"subject_token_type" json:"subject_token_type"`
	GatewayTokenEnv  string `yaml:"gateway_token_env,omitempty" json:"gateway_token_env,omitempty"`
}

type effBrowse struct {
	TopK        int  `yaml:"top_k" json:"top_k"`
	CacheStable bool `yaml:"cache_stable" json:"cache_stable"`
	MaxChildren int  `yaml:"max_children" json:"max_children"`
}

type effFirewall struct {
	MaxInlineTokens int      `yaml:"max_inline_tokens" json:"max_inline_tokens"`
	Enabled         bool     `yaml:"enabled" json:"enabled"`
	OffFor          []string `yaml:"off_for" json:"off_for"`
}

type effArtifacts struct {
	TTL      string `yaml:"ttl" json:"ttl"`
	MaxBytes string `yaml:"max_bytes" json:"max_bytes"`
}

type effRetry struct {
	MaxAttempts    int      `yaml:"max_attempts" json:"max_attempts"`
	BaseDelay      string   `yaml:"base_delay" json:"base_delay"`
	MaxDelay       string   `yaml:"max_delay" json:"max_delay"`
	Jitter         bool     `yaml:"jitter" json:"jitter"`
	RetryableCodes []string `yaml:"retryable_codes,flow" json:"retryable_codes"`
}

type effCache struct {
	ReadOnly   bool     `yaml:"read_only" json:"read_only"`
	TTL        string   `yaml:"ttl" json:"ttl"`
	MaxEntries int      `yaml:"max_entries" json:"max_entries"`
	Allow      []string `yaml:"allow" json:"allow"`
}

type effRateLimit struct {
	MaxCallsPerMinute  int `yaml:"max_calls_per_minute,omitempty" json:"max_calls_per_minute,omitempty"`
	MaxCallsPerSession int `yaml:"max_calls_per_session,omitempty" json:"max_calls_per_session,omitempty"`
}

type effExpose struct {
	Direct []string `yaml:"direct" json:"direct"`
}

type effSchema struct {
	Strict        bool   `yaml:"strict" json:"strict"`
	MaxBytes      string `yaml:"max_bytes" json:"max_bytes"`
	MaxDepth      int    `yaml:"max_depth" json:"max_depth"`
	MaxProperties int    `yaml:"max_properties" json:"max_properties"`
}

type effLog struct {
	Level  string `yaml:"level" json:"level"`
	Format string `yaml:"format" json:"format"`
}

// list returns s, or an empty non-nil list (printed as [] rather than null).
func list(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// effective builds the written-out form of c.
func (c *Config) effective() effConfig {
	e := effConfig{
		Mode:        string(c.Mode),
		Environment: string(c.Environment),
		Listen: effListen{
			Transport:          string(c.Listen.Transport),
			Addr:               c.Listen.Addr,
			Path:               c.Listen.Path,
			AllowedHosts:       list(c.Listen.AllowedHosts),
			AllowedOrigins:     list(c.Listen.AllowedOrigins),
			SessionIdleTimeout: FormatDuration(c.Listen.SessionIdleTimeout),
		},
		StateDir:     c.StateDir,
		Upstreams:    make([]effUpstream, 0, len(c.Upstreams)),
		Registry:     list(c.Registry),
		Browse:       effBrowse(c.Browse),
		Firewall:     effFirewall{MaxInlineTokens: c.Firewall.MaxInlineTokens, Enabled: c.Firewall.Enabled, OffFor: list(c.Firewall.OffFor)},
		Artifacts:    effArtifacts{TTL: FormatDuration(c.Artifacts.TTL), MaxBytes: FormatSize(c.Artifacts.MaxBytes)},
		Retry:        effRetry{MaxAttempts: c.Retry.MaxAttempts, BaseDelay: FormatDuration(c.Retry.BaseDelay), MaxDelay: FormatDuration(c.Retry.MaxDelay), Jitter: c.Retry.Jitter, RetryableCodes: list(c.Retry.RetryableCodes)},
		Cache:        effCache{ReadOnly: c.Cache.ReadOnly, TTL: FormatDuration(c.Cache.TTL), MaxEntries: c.Cache.MaxEntries, Allow: list(c.Cache.Allow)},
		RateLimits:   make(map[string]effRateLimit, len(c.RateLimits)),
		Expose:       effExpose{Direct: list(c.Expose.Direct)},
		Schema:       effSchema{Strict: c.Schema.Strict, MaxBytes: FormatSize(c.Schema.MaxBytes), MaxDepth: c.Schema.MaxDepth, MaxProperties: c.Schema.MaxProperties},
		TolerantArgs: c.TolerantArgs,
		Principals:   make(map[string]effPrincipal, len(c.Principals)),
		Log:          effLog(c.Log),
	}
	for k, v := range c.Principals {
		e.Principals[k] = effPrincipal(v)
	}
	e.Auth = effAuth{Realm: c.Auth.Realm, MaxTokenBytes: c.Auth.MaxTokenBytes, Issuers: []effIssuer{},
		Local: effLocal{Sub: c.Auth.Local.Sub, ActorType: c.Auth.Local.ActorType, OrgID: c.Auth.Local.OrgID, Claims: c.Auth.Local.Claims}}
	for _, is := range c.Auth.Issuers {
		ei := effIssuer{Name: is.Name, Issuer: is.Issuer, Audiences: is.Audiences, Alg: is.Alg, HS256SecretEnv: is.HS256SecretEnv,
			JWKSFile: is.JWKSFile, JWKSURL: is.JWKSURL, DefaultActorType: is.DefaultActorType}
		if is.JWKSRefresh > 0 {
			ei.JWKSRefresh = FormatDuration(is.JWKSRefresh)
		}
		if is.Claims != (identity.ClaimNames{}) {
			ei.Claims = &effClaimNames{ActorType: is.Claims.ActorType, ClientID: is.Claims.ClientID, OrgID: is.Claims.OrgID}
		}
		if is.ClockSkew > 0 {
			ei.ClockSkew = FormatDuration(is.ClockSkew)
		}
		e.Auth.Issuers = append(e.Auth.Issuers, ei)
	}
	if c.Policy.File != "" {
		e.Policy = &effPolicy{File: c.Policy.File, WatchInterval: FormatDuration(c.Policy.WatchInterval)}
	}
	e.Approvals = effApprovals{TTL: FormatDuration(c.Approvals.TTL), MaxPending: c.Approvals.MaxPending}
	e.Receipts = effReceipts(c.Receipts)
	e.Incident = effIncident(c.Incident)
	e.Admin = effAdmin{TokenEnv: c.Admin.TokenEnv, Claim: c.Admin.Claim}
	if t := c.Listen.TLS; t != nil {
		e.Listen.TLS = &effTLS{Cert: t.Cert, Key: t.Key}
	}
	for k, v := range c.RateLimits {
		e.RateLimits[k] = effRateLimit(v)
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		eu := effUpstream{
			Name:           u.Name,
			Command:        u.Command,
			URL:            u.URL,
			SSE:            u.SSE,
			Catalog:        u.Catalog,
			Env:            u.Env,
			Dir:            u.Dir,
			TrustLevel:     string(u.TrustLevel),
			Risk:           string(u.Risk),
			ConnectTimeout: FormatDuration(u.ConnectTimeout),
			CallTimeout:    FormatDuration(u.CallTimeout),
			ToolPrefix:     u.ToolPrefix,
			Sessions:       string(u.Sessions),
			Enabled:        u.Enabled,
		}
		if !u.Credentials.IsZero() {
			eu.Credentials = &effCredentials{
				BearerEnv:  u.Credentials.BearerEnv,
				BearerFile: u.Credentials.BearerFile,
				HeadersEnv: u.Credentials.HeadersEnv,
			}
			if te := u.Credentials.TokenExchange; te != nil {
				eu.Credentials.TokenExchange = &effTokenExchange{TokenURL: te.TokenURL, ClientID: te.ClientID, ClientSecretEnv: te.ClientSecretEnv,
					Audience: te.Audience, Scope: te.Scope, Subject: te.Subject, SubjectTokenType: te.SubjectTokenType, GatewayTokenEnv: te.GatewayTokenEnv}
			}
		}
		if w := u.Workspace; w != nil {
			eu.Workspace = &effWorkspace{Roots: w.Roots, PathArgs: w.PathArgs}
		}
		if g := u.Egress; g != nil {
			eu.Egress = &effEgress{Allow: g.Allow, URLArgs: g.URLArgs}
		}
		e.Upstreams = append(e.Upstreams, eu)
	}
	return e
}

// Effective returns the effective settings as YAML: every key of the file
// with defaults filled in, paths resolved, durations and sizes as strings.
// Credentials show only environment variable names and file paths, never a
// value. Parsing the result gives back an equal Config.
func (c *Config) Effective() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c.effective()); err != nil {
		return nil, fmt.Errorf("config: encode effective settings: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode effective settings: %w", err)
	}
	return buf.Bytes(), nil
}

// EffectiveJSON is Effective as indented JSON (also a valid configuration).
func (c *Config) EffectiveJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c.effective()); err != nil {
		return nil, fmt.Errorf("config: encode effective settings: %w", err)
	}
	return buf.Bytes(), nil
}
