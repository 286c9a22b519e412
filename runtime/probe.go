package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// ProbeResult is what Probe learned of one enabled upstream.
type ProbeResult struct {
	// Name is the upstream's configured name (the server_id).
	Name string
	// Transport is command, url, sse or catalog.
	Transport string
	// Protocol is the MCP revision negotiated ("" for a static catalog);
	// ServerName and ServerVersion are the server's own serverInfo.
	Protocol, ServerName, ServerVersion string
	// Tools are the upstream's tools as it lists them.
	Tools []catalog.ToolDef
	// Err is why the upstream could not be connected or listed.
	Err error
}

// Probe connects every enabled upstream of cfg the way serve does (the
// same transports, credentials, environment and sandbox), lists its tools
// once, and disconnects: initialize plus list, for `config check
// --connect` and `registry init`. It opens no state and serves nothing.
// Each upstream gets its connect_timeout to become ready; results are in
// configuration order. The error is for a configuration the runtime
// refuses (New's errors), not for an upstream that fails.
func Probe(ctx context.Context, cfg *config.Config, deps Deps) ([]ProbeResult, error) {
	r, err := New(cfg, deps)
	if err != nil {
		return nil, err
	}
	clients := map[string]*upstream.Client{}
	for _, c := range r.clients() {
		clients[c.Name()] = c
	}
	timeouts := map[string]time.Duration{}
	for _, u := range r.cfg.Upstreams {
		timeouts[u.Name] = time.Duration(u.ConnectTimeout)
	}
	transports := map[string]string{}
	for _, u := range r.cfg.Upstreams {
		transports[u.Name] = u.Transport()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ups := r.upstreams()
	results := make([]ProbeResult, len(ups))
	var wg sync.WaitGroup
	for i, e := range ups {
		name := e.name()
		results[i] = ProbeResult{Name: name, Transport: transports[name]}
		c := clients[name]
		wg.Go(func() {
			res := &results[i]
			if c != nil {
				var run sync.WaitGroup
				run.Go(func() { _ = c.Run(ctx) })
				defer func() {
					_ = c.Close()
					run.Wait()
				}()
				wait, stop := context.WithTimeout(ctx, timeouts[name]+time.Second)
				err := c.WaitReady(wait)
				stop()
				if err != nil {
					if st := c.State(); st.Err != nil {
						err = st.Err
					}
					res.Err = err
					return
				}
				if ir := c.InitializeResult(); ir != nil {
					res.Protocol = ir.ProtocolVersion
					if ir.ServerInfo != nil {
						res.ServerName, res.ServerVersion = ir.ServerInfo.Name, ir.ServerInfo.Version
					}
				}
				tools, err := c.ListTools(ctx)
				if err != nil {
					res.Err = err
					return
				}
				lc := liveConn{c: c}
				src, err := lc.toolDefs(tools)
				if err != nil {
					res.Err = err
					return
				}
				res.Tools = src
				return
			}
			src, err := e.listing(ctx)
			if err != nil {
				res.Err = err
				return
			}
			res.Tools = src.Tools
		})
	}
	wg.Wait()
	for i := range results {
		if results[i].Err != nil && errors.Is(results[i].Err, context.DeadlineExceeded) {
			results[i].Err = errors.New("not ready within its connect_timeout")
		}
	}
	return results, nil
}
