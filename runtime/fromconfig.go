package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/quiver-mcp/quiver/runtime/tokenexchange"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// FromConfig turns a loaded configuration into runtime Options: static
// catalogs are read, credential and environment references are resolved
// with getenv (their values never appear in errors).
func FromConfig(cfg *config.Config, getenv func(string) (string, bool), log *slog.Logger) (Options, error) {
	opts := Options{
		TopK:          cfg.Browse.TopK,
		MaxChildren:   cfg.Browse.MaxChildren,
		CacheStable:   cfg.Browse.CacheStable,
		StrictSchemas: cfg.Schema.Strict,
		SchemaLimits: catalog.SchemaLimits{
			MaxBytes:      int(cfg.Schema.MaxBytes),
			MaxDepth:      cfg.Schema.MaxDepth,
			MaxProperties: cfg.Schema.MaxProperties,
		},
		StateDir:           cfg.StateDir,
		ArtifactTTL:        cfg.Artifacts.TTL,
		ArtifactMaxBytes:   cfg.Artifacts.MaxBytes,
		MaxInlineTokens:    cfg.Firewall.MaxInlineTokens,
		FirewallOff:        !cfg.Firewall.Enabled,
		Logger:             log,
		Environment:        guard.Environment(cfg.Environment),
		TolerantArgs:       cfg.TolerantArgs,
		AllowedHosts:       cfg.Listen.AllowedHosts,
		AllowedOrigins:     cfg.Listen.AllowedOrigins,
		SessionIdleTimeout: cfg.Listen.SessionIdleTimeout,
		Retry: controls.RetryPolicy{
			MaxAttempts:    cfg.Retry.MaxAttempts,
			BaseDelay:      cfg.Retry.BaseDelay,
			MaxDelay:       cfg.Retry.MaxDelay,
			Jitter:         cfg.Retry.Jitter,
			RetryableCodes: cfg.Retry.RetryableCodes,
		},
	}
	if len(cfg.Registry) > 0 {
		globs := append([]string(nil), cfg.Registry...)
		opts.Registry = func() (*guard.Registry, error) { return guard.LoadRegistry(globs) }
	}
	if len(cfg.Principals) > 0 {
		opts.Principals = make(map[string]Principal, len(cfg.Principals))
		for name, p := range cfg.Principals {
			opts.Principals[name] = Principal{ReadOnly: p.ReadOnly}
		}
	}
	opts.Auth = cfg.Auth
	if cfg.Auth.Local.Sub != "" {
		opts.LocalPrincipal = cfg.Auth.Local.Sub
	}
	opts.Getenv = func(k string) string { v, _ := getenv(k); return v }
	opts.PolicyFile, opts.PolicyWatchInterval = cfg.Policy.File, cfg.Policy.WatchInterval
	opts.ApprovalTTL, opts.ApprovalMaxPending = cfg.Approvals.TTL, cfg.Approvals.MaxPending
	opts.IncidentPersist = cfg.Incident.Persist
	if cfg.Admin.TokenEnv != "" {
		tok, ok := getenv(cfg.Admin.TokenEnv)
		if !ok || tok == "" {
			return Options{}, fmt.Errorf("admin.token_env: environment variable %s is not set", cfg.Admin.TokenEnv)
		}
		opts.AdminToken = []byte(tok)
	}
	if cl := cfg.Admin.Claim; cl != nil {
		if len(cfg.Auth.Issuers) == 0 {
			return Options{}, fmt.Errorf("admin.claim needs auth.issuers to verify administrators' tokens")
		}
		opts.AdminClaim = &admin.Claim{Name: cl.Name, Value: cl.Value}
	}
	if cfg.Cache.ReadOnly {
		opts.Cache = &controls.CacheOptions{TTL: cfg.Cache.TTL, MaxEntries: cfg.Cache.MaxEntries, Allow: cfg.Cache.Allow}
	}
	if len(cfg.RateLimits) > 0 {
		opts.RateLimits = make(map[string]controls.Limit, len(cfg.RateLimits))
		for scope, l := range cfg.RateLimits {
			opts.RateLimits[scope] = controls.Limit{PerMinute: l.MaxCallsPerMinute, PerSession: l.MaxCallsPerSession}
		}
	}
	opts.FirewallOffFor = cfg.Firewall.OffFor
	opts.Expose = cfg.Expose.Direct
	switch cfg.Mode {
	case config.ModeGateway, "":
		opts.Mode = ModeGateway
	case config.ModeProxy:
		opts.Mode = ModeProxy
	case config.ModeDirect:
		opts.Mode = ModeDirect
	default:
		return Options{}, fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	if len(cfg.Expose.Direct) > 0 && opts.Mode != ModeGateway && log != nil {
		log.Warn("expose.direct applies to gateway mode only", "mode", opts.Mode)
	}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		if !u.Enabled {
			continue
		}
		uo := UpstreamOptions{Name: u.Name, TrustLevel: string(u.TrustLevel), Risk: string(u.Risk), Credentialed: !u.Credentials.IsZero(),
			ToolPrefix: u.ToolPrefix, PerClient: u.Sessions == config.SessionsPerClient}
		if w := u.Workspace; w != nil {
			uo.Workspace = &WorkspaceGuard{Roots: w.Roots, PathArgs: w.PathArgs}
		}
		if g := u.Egress; g != nil {
			uo.Egress = &EgressGuard{Allow: g.Allow, URLArgs: g.URLArgs}
		}
		if u.Catalog != "" {
			src, err := catalog.LoadFile(u.Catalog)
			if err != nil {
				return Options{}, fmt.Errorf("upstream %q: %w", u.Name, err)
			}
			uo.Catalog = &src
			opts.Upstreams = append(opts.Upstreams, uo)
			continue
		}
		headers, err := u.ResolveHeaders(getenv)
		if err != nil {
			return Options{}, err
		}
		env, err := u.ResolveEnv(getenv)
		if err != nil {
			return Options{}, err
		}
		var bearer func(context.Context) (string, error)
		if te := u.Credentials.TokenExchange; te != nil {
			if uo.Exchange, bearer, err = exchangerFor(u, te, getenv); err != nil {
				return Options{}, err
			}
		}
		uo.Spec = upstream.Spec{
			Name:           u.Name,
			Command:        u.Command,
			Env:            env,
			Dir:            u.Dir,
			URL:            u.URL,
			SSE:            u.SSE,
			Headers:        headers,
			Bearer:         bearer,
			ConnectTimeout: u.ConnectTimeout,
			CallTimeout:    u.CallTimeout,
		}
		opts.Upstreams = append(opts.Upstreams, uo)
	}
	return opts, nil
}

// gatewaySubjectKey is the cache key of the gateway's own subject token;
// principal keys start with "jwt:" or "local:", so it never collides.
const gatewaySubjectKey = "quiver:gateway"

// exchangerFor builds the RFC 8693 exchanger of upstream u, and the token
// source of the requests no caller is bound to: the exchange of the
// gateway's own subject token when gateway_token_env is set, else nil
// (those requests carry no Authorization header).
func exchangerFor(u *config.Upstream, te *config.TokenExchange, getenv func(string) (string, bool)) (*tokenexchange.Exchanger, func(context.Context) (string, error), error) {
	secret, gatewayToken, err := u.ResolveTokenExchange(getenv)
	if err != nil {
		return nil, nil, err
	}
	tokenType := tokenexchange.TokenTypeAccessToken
	if te.SubjectTokenType == config.SubjectTokenJWT {
		tokenType = tokenexchange.TokenTypeJWT
	}
	ex, err := tokenexchange.New(tokenexchange.Config{
		TokenURL: te.TokenURL, ClientID: te.ClientID, ClientSecret: secret,
		Audience: te.Audience, Scope: te.Scope, SubjectTokenType: tokenType,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %q: credentials.token_exchange: %w", u.Name, err)
	}
	if gatewayToken == "" {
		return ex, nil, nil
	}
	bearer := func(ctx context.Context) (string, error) {
		return ex.Exchange(ctx, gatewaySubjectKey, gatewayToken, time.Time{})
	}
	return ex, bearer, nil
}
