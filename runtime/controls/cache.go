package controls

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// CacheOptions configure the read-only result cache (spec 003 §4.5).
type CacheOptions struct {
	// TTL bounds an entry's life; MaxEntries the number of entries (LRU).
	TTL        time.Duration
	MaxEntries int
	// Allow restricts caching to tool_ids matching these path.Match globs;
	// empty allows every read-only tool.
	Allow []string
}

// Cache holds results of read-only tools by tool_id and canonical
// arguments. It is TTL- and size-bounded. The expirable LRU behind it runs a
// goroutine that never stops, so a runtime creates one Cache and keeps it.
// Safe for concurrent use.
type Cache[V any] struct {
	lru   *expirable.LRU[string, V]
	allow []string
}

// NewCache returns a cache; TTL and MaxEntries default to 60 s and 256.
func NewCache[V any](o CacheOptions) *Cache[V] {
	if o.TTL <= 0 {
		o.TTL = 60 * time.Second
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 256
	}
	return &Cache[V]{lru: expirable.NewLRU[string, V](o.MaxEntries, nil, o.TTL), allow: o.Allow}
}

// Allowed reports whether toolID passes the allow list.
func (c *Cache[V]) Allowed(toolID string) bool {
	if len(c.allow) == 0 {
		return true
	}
	for _, g := range c.allow {
		if ok, _ := path.Match(g, toolID); ok {
			return true
		}
	}
	return false
}

// Key derives the cache key of a call: the catalog generation (so nothing
// cached under one catalog is served under the next), the tool_id, and the
// sha256 of the canonical JSON of args (object keys sorted, so argument
// order does not matter).
func Key(gen uint64, toolID string, args any) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	sum := sha256.Sum256(b)
	return strconv.FormatUint(gen, 10) + "\x00" + toolID + "\x00" + hex.EncodeToString(sum[:]), nil
}

// Get returns the entry under key.
func (c *Cache[V]) Get(key string) (V, bool) { return c.lru.Get(key) }

// Put stores v under key.
func (c *Cache[V]) Put(key string, v V) { c.lru.Add(key, v) }

// Purge drops every entry (on catalog refresh).
func (c *Cache[V]) Purge() { c.lru.Purge() }

// Len returns the number of entries.
func (c *Cache[V]) Len() int { return c.lru.Len() }
