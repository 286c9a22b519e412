package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/controls"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// Applied is what Apply changed.
type Applied struct {
	// Added, Removed and Changed name the upstreams started, stopped and
	// restarted with new settings.
	Added, Removed, Changed []string
	// Policy is the policy_id put in force ("" when the policy file is
	// the same and unchanged).
	Policy string
	// Registry is the version of the registry pinned now.
	Registry string
	// Kept are the settings that changed in the file but cannot change
	// while quiver runs (listen, state, mode, ...): the running values
	// stay until a restart.
	Kept []string
}

// live are the top-level settings Apply changes while quiver runs; every
// other one is reported in Applied.Kept when it differs.
var live = []string{"upstreams", "policy", "registry", "rate_limits"}

// retireGrace is how long an upstream that Apply removed or replaced
// keeps serving the calls already dispatched to it before it is stopped.
const retireGrace = 2 * time.Second

// Apply puts cfg in force without dropping a client session: upstreams
// are added, removed or restarted (an entry whose settings changed), the
// policy file is loaded again (or another one watched), the registry is
// pinned again from cfg's globs, and the rate limits replaced. What cannot
// change live (listen, state, mode, environment, auth, ...) keeps its
// running value and is named in Applied.Kept.
//
// Everything is checked before anything changes: an invalid cfg, a
// policy or registry that does not load, an upstream whose credentials do
// not resolve, and the configuration in force stays whole. New and
// restarted upstreams are started and given up to Timing.ReadyTimeout to
// come up while the old fleet serves; the fleet, policy, registry and
// limits are then swapped, the catalog rebuilt, and the upstreams no
// longer configured stopped after retireGrace.
func (r *Runtime) Apply(ctx context.Context, cfg *config.Config) (Applied, error) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	var out Applied
	if r.life == nil || r.life.Err() != nil {
		return out, errors.New("runtime: Apply before Start or after Close")
	}
	if cfg == nil {
		return out, errors.New("runtime: no configuration")
	}
	c := *cfg
	if err := validate(&c); err != nil {
		return out, err
	}
	out.Kept = restartOnly(r.cfg, &c)
	policyLive := (r.cfg.Policy.File == "") == (c.Policy.File == "")
	if !policyLive {
		out.Kept = append(out.Kept, "policy")
	}

	// Prepare: nothing below changes what is served.
	old := r.fleet.Load()
	byName := map[string]*upstreamEntry{}
	for _, e := range old.entries {
		byName[e.name()] = e
	}
	var entries, started, retired []*upstreamEntry
	kept := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if !u.Enabled {
			continue
		}
		if e, ok := byName[u.Name]; ok && reflect.DeepEqual(e.cfg, *u) {
			entries = append(entries, e)
			kept[u.Name] = true
			continue
		}
		e, err := r.newUpstream(u)
		if err != nil {
			return Applied{}, err
		}
		entries = append(entries, e)
		started = append(started, e)
		if _, ok := byName[u.Name]; ok {
			out.Changed = append(out.Changed, u.Name)
		} else {
			out.Added = append(out.Added, u.Name)
		}
	}
	for _, e := range old.entries {
		if !kept[e.name()] {
			retired = append(retired, e)
			if !slices.Contains(out.Changed, e.name()) {
				out.Removed = append(out.Removed, e.name())
			}
		}
	}
	var pol *policy.Policy
	if policyLive && c.Policy.File != "" {
		p, err := policy.Load(c.Policy.File)
		if err != nil {
			return Applied{}, fmt.Errorf("policy: %w", err)
		}
		if cur := r.auth.policy.Policy(); c.Policy != r.applied().Policy || cur == nil || cur.Version != p.Version {
			pol, out.Policy = p, p.ID
		}
	}
	pn, err := r.pinRegistry(c.Registry, entries, &c)
	if err != nil {
		return Applied{}, err
	}
	out.Registry = pn.connector.Pinned().Version()
	limiter := controls.NewRateLimiter(rateLimits(&c), r.kv, nil)

	// Start what is new while the fleet in force serves.
	for _, e := range started {
		r.launch(e)
	}
	r.waitSettled(ctx, started, r.cfg.Timing.ReadyTimeout)

	// Commit.
	r.fleet.Store(newFleet(entries))
	if pol != nil {
		r.auth.policy.Swap(pol)
		r.syncCapabilityTools()
	}
	if policyLive && c.Policy.File != "" && c.Policy != r.applied().Policy {
		r.watchPolicy(r.life, c.Policy)
	}
	r.pins.Store(pn)
	r.limits.Store(limiter)
	next := r.applied()
	next.Upstreams, next.Registry, next.RateLimits = c.Upstreams, c.Registry, c.RateLimits
	if policyLive {
		next.Policy = c.Policy
	}
	r.live.Store(&next)
	for _, e := range started {
		r.markDirty(e.name())
	}
	if err := r.rebuild(ctx); err != nil {
		r.log.Error("catalog rebuild after reload failed; serving the previous catalog", "err", err)
	}
	if len(retired) > 0 {
		removed := out.Removed
		r.wg.Go(func() {
			select {
			case <-time.After(retireGrace):
			case <-r.life.Done():
			}
			for _, e := range retired {
				r.retire(e)
			}
			for _, name := range removed {
				r.met.forget(name)
			}
			// A restarted upstream's old client reported itself closed
			// last; its liveness is its successor's.
			for _, e := range r.upstreams() {
				if e.client != nil && slices.ContainsFunc(retired, func(o *upstreamEntry) bool { return o.name() == e.name() }) {
					r.met.live(e.name(), e.client.State().Status == upstream.StatusReady)
				}
			}
		})
	}
	return out, nil
}

// applied returns a copy of the configuration in force: the one Start
// used, with the live settings Apply changed since.
func (r *Runtime) applied() config.Config {
	if c := r.live.Load(); c != nil {
		return *c
	}
	return *r.cfg
}

// String is the one log line of what Apply did.
func (a Applied) String() string {
	var parts []string
	add := func(what string, names []string) {
		if len(names) > 0 {
			parts = append(parts, what+" "+strings.Join(names, ","))
		}
	}
	add("added", a.Added)
	add("removed", a.Removed)
	add("restarted", a.Changed)
	if a.Policy != "" {
		parts = append(parts, "policy "+a.Policy)
	}
	parts = append(parts, "registry "+a.Registry)
	return strings.Join(parts, "; ")
}

// restartOnly names the top-level settings (by their file keys) that
// differ between the configuration in force and next and cannot change
// while quiver runs.
func restartOnly(cur, next *config.Config) []string {
	a, b := reflect.ValueOf(cur).Elem(), reflect.ValueOf(next).Elem()
	var out []string
	for i := range a.NumField() {
		f := a.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "" || key == "-" || slices.Contains(live, key) {
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, key)
		}
	}
	return out
}
