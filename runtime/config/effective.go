package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/quiver-mcp/quiver/runtime/identity"
	yaml "go.yaml.in/yaml/v3"
)

// printable returns a copy of c as Effective writes it: lists and maps
// that are nil (Config keeps them nil when empty) are made empty, so that
// they print as [] and {} rather than null and the file shows every key.
// c itself is not changed.
func (c *Config) printable() Config {
	p := *c
	list := func(s *[]string) {
		if *s == nil {
			*s = []string{}
		}
	}
	list(&p.Listen.AllowedHosts)
	list(&p.Listen.AllowedOrigins)
	list(&p.Registry)
	list(&p.Firewall.OffFor)
	list(&p.Retry.RetryableCodes)
	list(&p.Cache.Allow)
	list(&p.Expose.Direct)
	if p.Upstreams == nil {
		p.Upstreams = []Upstream{}
	}
	if p.Auth.Issuers == nil {
		p.Auth.Issuers = []identity.IssuerConfig{}
	}
	if p.RateLimits == nil {
		p.RateLimits = map[string]RateLimit{}
	}
	if p.Principals == nil {
		p.Principals = map[string]Principal{}
	}
	if p.State.Redis == (Redis{KeyPrefix: DefaultRedisKeyPrefix}) {
		// Nothing of redis is set: the section is left out.
		p.State.Redis = Redis{}
	}
	return p
}

// Effective returns the effective settings as YAML: every key of the file
// with defaults filled in, paths resolved, durations and sizes as strings.
// Credentials show only environment variable names and file paths, never a
// value. Parsing the result gives back an equal Config.
func (c *Config) Effective() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c.printable()); err != nil {
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
	if err := enc.Encode(c.printable()); err != nil {
		return nil, fmt.Errorf("config: encode effective settings: %w", err)
	}
	return buf.Bytes(), nil
}
