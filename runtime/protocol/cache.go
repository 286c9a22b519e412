package protocol

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultListTTL is how long a client may reuse one of quiver's listings
// while the catalog is settled. A rebuild within it is announced anyway:
// list_changed (subscriptions/listen at the sessionless revision) tells
// the client to list again.
const DefaultListTTL = time.Minute

// CacheOptions say what is true of quiver's listings (SEP-2549's ttlMs and
// cacheScope).
type CacheOptions struct {
	// TTL of a listing while the catalog is settled (default
	// DefaultListTTL).
	TTL time.Duration
	// Settled reports whether every upstream is ready; while one is not,
	// its items may join at any moment and listings are stale at once.
	Settled func() bool
	// Private reports whether listings depend on the caller (discovery
	// filtered by identity): then only the caller's own client may cache
	// them.
	Private func() bool
}

// Cacheable returns the go-sdk's SetCacheable hook for o: listings and
// server/discover are fresh for the TTL when the catalog is settled, and
// private when filtered by identity; a resource read is passed on from an
// upstream whose freshness quiver does not know, so it is stale at once
// and private.
func Cacheable(o CacheOptions) func(context.Context, mcp.Request, *mcp.Cacheable) {
	if o.TTL <= 0 {
		o.TTL = DefaultListTTL
	}
	return func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
		c.CacheScope = "public"
		if o.Private != nil && o.Private() {
			c.CacheScope = "private"
		}
		c.TTLMs = int(o.TTL / time.Millisecond)
		if o.Settled != nil && !o.Settled() {
			c.TTLMs = 0
		}
		if _, ok := req.(*mcp.ReadResourceRequest); ok {
			c.TTLMs, c.CacheScope = 0, "private"
		}
	}
}
