package runtime

import (
	"context"
	"fmt"
	"github.com/quiver-mcp/quiver/runtime/config"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/router"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// state is everything derived from one catalog build. It is immutable and
// replaced whole (spec 003 §4.6).
type state struct {
	gen    uint64
	snap   *catalog.Snapshot
	router *router.Router
	// owner maps a server name of the catalog to the upstream serving it.
	owner map[string]*upstreamEntry
	built time.Time
	// gate is the front door, judging by the registry loaded with this
	// catalog.
	gate *guard.Gate
	// exp is what this catalog lists directly.
	exp *exposure
}

func (r *Runtime) emptyState() *state {
	snap, _, _ := catalog.Ingest(catalog.Source{}, catalog.Options{Cards: r.cards})
	return &state{snap: snap, owner: map[string]*upstreamEntry{}, gate: guard.NewGate(nil, r.cfg.Environment), exp: emptyExposure()}
}

// releaseAfterBuild is the catalog size from which a rebuild returns its
// transient memory to the OS at once.
const releaseAfterBuild = 5000

// listingTimeout bounds one upstream's re-listing during a rebuild.
const listingTimeout = 15 * time.Second

// rebuild re-lists the dirty upstreams, ingests every listing into a new
// snapshot, builds its router and swaps the new state in.
func (r *Runtime) rebuild(ctx context.Context) error {
	r.buildMu.Lock()
	defer r.buildMu.Unlock()
	ups := r.upstreams()
	r.mu.Lock()
	dirty := r.dirty
	r.dirty = map[string]bool{}
	r.mu.Unlock()

	// Re-list the dirty upstreams concurrently; an upstream that fails
	// keeps its last good listing (or none), and is retried on its next
	// state change.
	type result struct {
		name string
		src  catalog.Source
		tmpl []*mcp.ResourceTemplate
		err  error
	}
	results := make(chan result, len(ups))
	var wg sync.WaitGroup
	for _, c := range ups {
		if !dirty[c.name()] {
			continue
		}
		if c.client != nil && c.client.State().Status != upstream.StatusReady {
			// Not connected: listing would wait for it. Its next
			// connect marks it dirty again.
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, listingTimeout)
			defer cancel()
			src, err := c.listing(lctx)
			var tmpl []*mcp.ResourceTemplate
			if err == nil && r.cfg.Mode != config.ModeGateway {
				tmpl, err = c.templates(lctx)
			}
			results <- result{c.name(), src, tmpl, err}
		}()
	}
	wg.Wait()
	close(results)
	r.mu.Lock()
	inForce := make(map[string]bool, len(ups))
	for _, c := range ups {
		inForce[c.name()] = true
	}
	for name := range r.listings {
		// An upstream Apply removed.
		if !inForce[name] {
			delete(r.listings, name)
			delete(r.templates, name)
		}
	}
	for res := range results {
		if res.err != nil {
			r.log.Warn("listing an upstream failed; keeping its previous listing", "upstream", res.name, "err", res.err)
			continue
		}
		r.listings[res.name] = res.src
		r.templates[res.name] = res.tmpl
	}
	listings := make(map[string]catalog.Source, len(r.listings))
	for k, v := range r.listings {
		listings[k] = v
	}
	templates := make(map[string][]*mcp.ResourceTemplate, len(r.templates))
	for k, v := range r.templates {
		templates[k] = v
	}
	r.mu.Unlock()

	// Concatenate in configuration order: the order decides ~N collision
	// suffixes, so it must be stable across rebuilds.
	var src catalog.Source
	owner := map[string]*upstreamEntry{}
	for _, c := range ups {
		l, ok := listings[c.name()]
		if !ok {
			continue
		}
		claim := func(server string) bool {
			if o, taken := owner[server]; taken && o != c {
				return false
			}
			owner[server] = c
			return true
		}
		for _, t := range l.Tools {
			if claim(t.Server) {
				src.Tools = append(src.Tools, t)
			} else {
				r.log.Warn("server name served by two upstreams; the first configured wins", "server", t.Server, "upstream", c.name())
			}
		}
		for _, res := range l.Resources {
			if claim(res.Server) {
				src.Resources = append(src.Resources, res)
			}
		}
		for _, p := range l.Prompts {
			if claim(p.Server) {
				src.Prompts = append(src.Prompts, p)
			}
		}
	}
	start := time.Now()
	gate, cardReg := r.frontDoor()
	classify := func(server, name string) string {
		if p, ok := cardReg.Lookup(server, name); ok {
			return string(p.Class)
		}
		return ""
	}
	snap, rep, err := catalog.Ingest(src, catalog.Options{Cards: r.cards, Limits: r.schema, Strict: r.cfg.Schema.Strict, Classify: classify})
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if rep.Errors > 0 || rep.Warnings > 0 {
		r.log.Info("catalog ingest findings", "errors", rep.Errors, "warnings", rep.Warnings, "dropped", rep.Dropped)
	}
	rt, err := router.New(ctx, snap, router.Options{Cards: r.cards, MaxChildren: r.cfg.Browse.MaxChildren})
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	old := r.state.Load()
	next := &state{gen: old.gen + 1, snap: snap, router: rt, owner: owner, built: time.Now(), gate: gate}
	next.exp = r.expose(old.exp, snap, ups, owner, templates)
	r.state.Store(next)
	r.afterSwap(old, next)
	if r.cache != nil {
		// Keys carry the catalog generation, so nothing cached before the
		// swap is served after it; this only frees the memory.
		r.cache.Purge()
	}
	r.logClassification(snap, cardReg)
	r.met.catalogBuilt(snap, time.Since(start))
	if snap.Len() >= releaseAfterBuild {
		// Ingest and the index build of a large catalog allocate several
		// times what the catalog keeps; hand the difference back to the OS
		// now instead of holding it until the scavenger gets to it.
		debug.FreeOSMemory()
	}
	r.log.Info("catalog published", "gen", next.gen, "tools", rep.Tools, "resources", rep.Resources, "prompts", rep.Prompts, "build", time.Since(start).Round(time.Millisecond))
	// Browses in flight may still use the old router, so it stays open
	// until the next swap; the one before it is released now.
	r.mu.Lock()
	if r.retired != nil {
		r.retired.Close()
	}
	r.retired = old.router
	r.mu.Unlock()
	r.mu.Lock()
	close(r.rebuilt)
	r.rebuilt = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// rebuildDebounce coalesces bursts of list_changed notifications.
const rebuildDebounce = 50 * time.Millisecond

func (r *Runtime) rebuildLoop(ctx context.Context) {
	var tick <-chan time.Time
	if r.cfg.Timing.RefreshInterval > 0 {
		t := time.NewTicker(r.cfg.Timing.RefreshInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			for _, c := range r.upstreams() {
				r.markDirty(c.name())
			}
			continue
		case <-r.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rebuildDebounce):
		}
		if err := r.rebuild(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("catalog rebuild failed; serving the previous catalog", "err", err)
		}
	}
}
