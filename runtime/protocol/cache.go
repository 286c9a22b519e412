package protocol

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultListTTL is how long a client may reuse a stable answer (one that
// changes only with quiver's own configuration, such as gateway mode's
// meta-tools). A change within it is announced anyway: list_changed
// (subscriptions/listen at the sessionless revision) tells a client to list
// again.
const DefaultListTTL = time.Minute

// CacheOptions say what is true of quiver's answers (SEP-2549's ttlMs and
// cacheScope).
type CacheOptions struct {
	// TTL of a stable answer (default DefaultListTTL).
	TTL time.Duration
	// Stable reports whether an answer to req changes only with quiver's
	// configuration, not with the fleet. A listing that follows the fleet
	// changes whenever an upstream's does, at a moment nobody can
	// predict: it is stale at once (a client that wants to keep it
	// listens for list_changed).
	Stable func(req mcp.Request) bool
	// Settled reports whether every upstream is ready; until then even a
	// stable answer may change (gateway mode's resource and prompt verbs
	// appear with the first upstream that has resources or prompts).
	Settled func() bool
	// Private reports whether answers depend on the caller (discovery
	// filtered by identity): then only the caller's own client may cache
	// them.
	Private func() bool
}

// Cacheable returns the go-sdk's SetCacheable hook for o. A resource read
// is passed on from an upstream whose freshness quiver does not know: it
// is stale at once and private.
func Cacheable(o CacheOptions) func(context.Context, mcp.Request, *mcp.Cacheable) {
	if o.TTL <= 0 {
		o.TTL = DefaultListTTL
	}
	return func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
		c.TTLMs, c.CacheScope = 0, "public"
		if o.Private != nil && o.Private() {
			c.CacheScope = "private"
		}
		if _, ok := req.(*mcp.ReadResourceRequest); ok {
			c.CacheScope = "private"
			return
		}
		if o.Stable != nil && o.Stable(req) && (o.Settled == nil || o.Settled()) {
			c.TTLMs = int(o.TTL / time.Millisecond)
		}
	}
}
