package protocol

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCacheable(t *testing.T) {
	settled, private := true, false
	set := Cacheable(CacheOptions{
		Stable:  func(req mcp.Request) bool { _, ok := req.(*mcp.ListToolsRequest); return ok },
		Settled: func() bool { return settled }, Private: func() bool { return private }})
	check := func(req mcp.Request, ttl int, scope string) {
		t.Helper()
		var c mcp.Cacheable
		set(context.Background(), req, &c)
		if c.TTLMs != ttl || c.CacheScope != scope {
			t.Errorf("%T: %+v, want %d %s", req, c, ttl, scope)
		}
	}
	check(&mcp.ListToolsRequest{}, 60000, "public")
	check(&mcp.ListPromptsRequest{}, 0, "public")
	private = true
	check(&mcp.ListToolsRequest{}, 60000, "private")
	settled = false
	check(&mcp.ListToolsRequest{}, 0, "private")
	settled, private = true, false
	check(&mcp.ReadResourceRequest{}, 0, "private")
}
