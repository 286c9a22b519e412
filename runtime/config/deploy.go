package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/quiver-mcp/quiver/runtime/guard"
)

// ErrInsecureUpstream is matched by CheckTransport's error.
var ErrInsecureUpstream = errors.New("plain http:// upstream off loopback")

// ErrNoSandbox is matched by CheckSandboxes's error.
var ErrNoSandbox = errors.New("command upstream without a sandbox in environment prod")

// CheckTransport refuses, unless Insecure, an enabled url or sse upstream
// reached over plain http:// on a host other than localhost or a
// loopback address (spec 001 MUST 2): its requests, credentials included,
// would cross the network in clear. The error is one line naming the
// first such upstream.
func (c *Config) CheckTransport() error {
	if c.Insecure {
		return nil
	}
	for i, u := range c.Upstreams {
		field, raw := "url", u.URL
		if raw == "" {
			field, raw = "sse", u.SSE
		}
		if raw == "" || !u.Enabled {
			continue
		}
		p, err := url.Parse(raw)
		if err != nil || !strings.EqualFold(p.Scheme, "http") || loopbackHost(p.Hostname()) {
			continue
		}
		return fmt.Errorf("%supstreams[%d].%s: %w (%s): use https, or pass --insecure (insecure: true) to accept it",
			c.sourcePrefix(), i, field, ErrInsecureUpstream, u.Name)
	}
	return nil
}

// CheckSandboxes refuses, in environment prod, an enabled command
// upstream without a sandbox block (serve refuses to start it).
func (c *Config) CheckSandboxes() error {
	if c.Environment != guard.EnvProd {
		return nil
	}
	for i, u := range c.Upstreams {
		if len(u.Command) > 0 && u.Enabled && u.Sandbox == nil {
			return fmt.Errorf("%supstreams[%d]: %w (%s): add sandbox: {fs: {write: [...]}, net: none} or sandbox: {off: \"<reason>\"}",
				c.sourcePrefix(), i, ErrNoSandbox, u.Name)
		}
	}
	return nil
}

func (c *Config) sourcePrefix() string {
	if c.Source == "" {
		return ""
	}
	return c.Source + ": "
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
