package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/quiver-mcp/quiver/runtime/admin"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
)

// The safety profile (spec 001): who the caller is (identity), what it may
// see and call (policy, incident state, approvals), and one receipt per
// request.

// openSafety opens what Start owns of the safety profile: the incident
// state, the approvals, the receipts writer and the admin API.
func (r *Runtime) openSafety(ctx context.Context) error {
	o := r.cfg
	sub := func(name string) (string, error) {
		if o.StateDir == "" {
			return "", nil
		}
		d := filepath.Join(o.StateDir, name)
		return d, os.MkdirAll(d, 0o700)
	}
	var err error
	// incident.persist false keeps the incident state in this process
	// only: not shared with other processes or replicas, lost at exit.
	var incidentKV qstate.KV = r.kv
	if !o.Incident.Persist {
		incidentKV = qstate.NewMemory(nil)
	}
	q := o.Incident.Quarantine
	if r.auth.incident, err = policy.NewIncident(policy.IncidentOptions{KV: incidentKV,
		QuarantineDenials: q.Denials, QuarantineWindow: time.Duration(q.Window), OnRevoke: r.forgetExchanged}); err != nil {
		return fmt.Errorf("incident state: %w", err)
	}
	if r.auth.approvals, err = policy.NewApprovals(policy.ApprovalOptions{KV: r.kv, TTL: time.Duration(o.Approvals.TTL), MaxPending: o.Approvals.MaxPending}); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	dir, err := sub(receipts.DirName)
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	cp := r.deps.ReceiptsCopy
	if cp == nil && o.Receipts.Stdout && o.Listen.Transport == config.TransportHTTP {
		// Over stdio, stdout carries the protocol.
		cp = os.Stdout
	}
	if dir == "" && cp == nil {
		// Nowhere to write: no writer, so no request pays for building
		// receipts that would be dropped.
		r.log.Warn("no state directory: receipts are not written")
	} else if r.rec.out, err = receipts.NewWriter(receipts.WriterOptions{Dir: dir, Copy: cp, Logger: r.log}); err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	if o.Policy.File != "" {
		r.watchPolicy(ctx, o.Policy)
	} else if r.auth.policy == nil {
		r.log.Warn("no policy configured: every principal sees and calls every tool; configure policy.file for default-deny authorization")
	}
	if err := r.openCapabilities(); err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	if len(r.adminToken) > 0 || r.adminClaim != nil {
		ao := admin.Options{Incident: r.auth.incident, Approvals: r.auth.approvals, Capabilities: r.caps.store, ToolRequests: r.caps.requests, Token: r.adminToken, Logger: r.log,
			OnAction: r.adminReceipt, OnDeny: func(req *http.Request, reason string) { r.denyReceipt(req, reason) }}
		if r.adminClaim != nil && r.verifier != nil {
			ao.Verifier, ao.AdminClaim = r.verifier, *r.adminClaim
		}
		if r.admin, err = admin.New(ao); err != nil {
			return err
		}
		if o.Listen.Transport == config.TransportHTTP {
			// The console shares the admin API's credentials and
			// receipts; its sessions live in the shared state.
			co := admin.ConsoleOptions{Options: ao, KV: r.kv, Fleet: consoleFleet{r}, Receipts: receipts.Reader{Dir: dir}}
			if r.console, err = admin.NewConsole(co); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchPolicy keeps the policy engine in step with the policy file p
// names until ctx ends or the next watchPolicy call (Apply, for another
// file) replaces the watch.
func (r *Runtime) watchPolicy(ctx context.Context, p config.Policy) {
	if r.policyWatch != nil {
		r.policyWatch()
	}
	ctx, cancel := context.WithCancel(ctx)
	r.policyWatch = cancel
	r.wg.Go(func() {
		_ = r.auth.policy.Watch(ctx, p.File, policy.WatchOptions{Interval: time.Duration(p.WatchInterval), OnChange: func(np *policy.Policy, err error) {
			if err != nil {
				r.log.Error("policy file not reloaded; the policy in force stays", "file", p.File, "err", err)
				return
			}
			r.log.Info("policy reloaded", "policy_id", np.ID, "version", np.Version)
			r.syncCapabilityTools()
		}})
	})
}

// closeSafety flushes the receipts and closes the stores.
func (r *Runtime) closeSafety() error {
	var errs []error
	if r.rec.out != nil {
		errs = append(errs, r.rec.out.Close())
	}
	return errors.Join(errs...)
}

// stripAuthorization removes the client's Authorization header before the
// MCP handler, so no code path can forward it (spec 001 MUST 5); the
// identity middleware does the same when auth is configured.
func stripAuthorization(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Header.Del("Authorization")
		h.ServeHTTP(w, req)
	})
}

// initIdentity builds the verifier (with issuers), the local principal and
// the policy engine; New calls it, so bad settings fail before Start.
func (r *Runtime) initIdentity() error {
	local := r.cfg.Auth.Local
	if local.Sub == "" {
		local.Sub = r.localName
	} else {
		r.localName = local.Sub
	}
	r.rec.local = local.Principal()
	if len(r.cfg.Auth.Issuers) > 0 {
		cfg := r.cfg.Auth
		cfg.Local = local
		getenv := func(k string) string { v, _ := r.deps.Getenv(k); return v }
		v, err := identity.NewVerifier(cfg, identity.Options{Getenv: getenv, Logger: r.log, Revoked: func(ctx context.Context, jti, sub string) (bool, error) {
			if in := r.auth.incident; in != nil {
				return in.Revoked(ctx, jti, sub)
			}
			return false, nil
		}})
		if err != nil {
			return fmt.Errorf("runtime: auth: %w", err)
		}
		r.verifier = v
	}
	switch {
	case r.cfg.Policy.File != "":
		p, err := policy.Load(r.cfg.Policy.File)
		if err != nil {
			return fmt.Errorf("runtime: policy: %w", err)
		}
		r.auth.policy = policy.NewEngine(p)
	case r.deps.Policy != nil:
		r.auth.policy = policy.NewEngine(r.deps.Policy)
	}
	return nil
}
