package protocol

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCacheable(t *testing.T) {
	settled, private := true, false
	set := Cacheable(CacheOptions{Settled: func() bool { return settled }, Private: func() bool { return private }})
	check := func(req mcp.Request, ttl int, scope string) {
		t.Helper()
		var c mcp.Cacheable
		set(context.Background(), req, &c)
		if c.TTLMs != ttl || c.CacheScope != scope {
			t.Errorf("%T: %+v, want %d %s", req, c, ttl, scope)
		}
	}
	list := &mcp.ListToolsRequest{}
	check(list, 60000, "public")
	private = true
	check(list, 60000, "private")
	settled = false
	check(list, 0, "private")
	settled, private = true, false
	check(&mcp.ReadResourceRequest{}, 0, "private")
}
