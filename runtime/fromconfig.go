package runtime

import (
	"fmt"
	"log/slog"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
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
		StateDir:         cfg.StateDir,
		ArtifactTTL:      cfg.Artifacts.TTL,
		ArtifactMaxBytes: cfg.Artifacts.MaxBytes,
		MaxInlineTokens:  cfg.Firewall.MaxInlineTokens,
		FirewallOff:      !cfg.Firewall.Enabled,
		Logger:           log,
	}
	warnUnenforced(cfg, log)
	switch cfg.Mode {
	case config.ModeGateway, "":
		opts.Mode = ModeGateway
	case config.ModeProxy:
		opts.Mode = ModeProxy
	default:
		return Options{}, fmt.Errorf("mode %q is not served yet", cfg.Mode)
	}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		if !u.Enabled {
			continue
		}
		uo := UpstreamOptions{Name: u.Name, TrustLevel: string(u.TrustLevel), Risk: string(u.Risk)}
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
		uo.Spec = upstream.Spec{
			Name:           u.Name,
			Command:        u.Command,
			Env:            env,
			Dir:            u.Dir,
			URL:            u.URL,
			SSE:            u.SSE,
			Headers:        headers,
			ConnectTimeout: u.ConnectTimeout,
			CallTimeout:    u.CallTimeout,
		}
		opts.Upstreams = append(opts.Upstreams, uo)
	}
	return opts, nil
}

// warnUnenforced names every configured setting this version does not
// enforce yet, so that nobody mistakes a configured control for an active
// one.
func warnUnenforced(cfg *config.Config, log *slog.Logger) {
	if log == nil {
		return
	}
	var unenforced []string
	if cfg.Retry.MaxAttempts > 1 {
		unenforced = append(unenforced, "retry")
	}
	if cfg.Cache.ReadOnly {
		unenforced = append(unenforced, "cache")
	}
	if len(cfg.RateLimits) > 0 {
		unenforced = append(unenforced, "rate_limits")
	}
	if len(cfg.Expose.Direct) > 0 {
		unenforced = append(unenforced, "expose.direct")
	}
	if len(cfg.Registry) > 0 {
		unenforced = append(unenforced, "registry")
	}
	if cfg.TolerantArgs {
		unenforced = append(unenforced, "tolerant_args")
	}
	if len(cfg.Listen.AllowedHosts) > 0 || len(cfg.Listen.AllowedOrigins) > 0 {
		unenforced = append(unenforced, "listen.allowed_hosts/allowed_origins")
	}
	for _, k := range unenforced {
		log.Warn("configured setting is not enforced by this version", "setting", k)
	}
}
