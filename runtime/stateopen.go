package runtime

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/config"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/redisstate"
)

// openState returns the state backend every kind of state is built on:
// Deps.State when a test injects one (the runtime does not close it), else
// the backend the configuration names (closed by Close). It is the one
// place that chooses a backend.
func (r *Runtime) openState(ctx context.Context) (b qstate.Backend, owned bool, err error) {
	if r.deps.State != nil {
		return r.deps.State, false, nil
	}
	ao := artifacts.Options{TTL: time.Duration(r.cfg.Artifacts.TTL), MaxBytes: int64(r.cfg.Artifacts.MaxBytes), Logger: r.log}
	s := r.cfg.State
	switch {
	case s.Backend == config.StateRedis:
		password, perr := s.Redis.ResolvePassword(r.deps.Getenv)
		if perr != nil {
			return nil, false, fmt.Errorf("state: %w", perr)
		}
		tc, terr := redisTLS(s.Redis)
		if terr != nil {
			return nil, false, fmt.Errorf("state: %w", terr)
		}
		b, err = redisstate.Open(ctx, redisstate.Options{URL: s.Redis.URL, Password: password, TLS: tc, KeyPrefix: s.Redis.KeyPrefix, Artifacts: ao, Logger: r.log})
	case r.cfg.StateDir == "":
		r.log.Warn("no state directory: state (artifacts, idempotency records, incident state, approvals) is kept in memory and lost at exit")
		b, err = qstate.OpenMemory(ao)
	default:
		if err := moveLegacyArtifacts(r.cfg.StateDir); err != nil {
			return nil, false, err
		}
		b, err = qstate.OpenEmbedded(ctx, qstate.EmbeddedOptions{Dir: filepath.Join(r.cfg.StateDir, "state"), Artifacts: ao, Logger: r.log})
	}
	if err != nil {
		return nil, false, fmt.Errorf("state backend %s: %w", s.Backend, err)
	}
	return b, true, nil
}

// redisTLS is the TLS configuration toward Redis: nil for redis:// URLs.
func redisTLS(c config.Redis) (*tls.Config, error) {
	if c.TLS.IsZero() && !isRediss(c.URL) {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLS.ServerName}
	if c.TLS.CAFile != "" {
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("state.redis.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("state.redis.tls.ca_file: %s holds no PEM certificate", c.TLS.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

func isRediss(u string) bool { return strings.HasPrefix(u, "rediss://") }

// errNotStarted is the error of the runtime's KV before Start opened the
// backend (and after Close).
var errNotStarted = fmt.Errorf("%w: the runtime is not started", qstate.ErrUnavailable)

// startedKV is the runtime's KV as the kinds of state made in New see it:
// it forwards to the backend's KV once Start has opened it, and fails with
// state.ErrUnavailable before (fail closed).
type startedKV struct {
	kv atomic.Pointer[qstate.KV]
}

func (s *startedKV) get() (qstate.KV, error) {
	p := s.kv.Load()
	if p == nil {
		return nil, errNotStarted
	}
	return *p, nil
}

// set makes kv (nil: none) the KV operations go to.
func (s *startedKV) set(kv qstate.KV) {
	if kv == nil {
		s.kv.Store(nil)
		return
	}
	s.kv.Store(&kv)
}

// Get implements state.KV.
func (s *startedKV) Get(ctx context.Context, key string) ([]byte, error) {
	kv, err := s.get()
	if err != nil {
		return nil, err
	}
	return kv.Get(ctx, key)
}

// Set implements state.KV.
func (s *startedKV) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	kv, err := s.get()
	if err != nil {
		return err
	}
	return kv.Set(ctx, key, val, ttl)
}

// Create implements state.KV.
func (s *startedKV) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	kv, err := s.get()
	if err != nil {
		return false, err
	}
	return kv.Create(ctx, key, val, ttl)
}

// Swap implements state.KV.
func (s *startedKV) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	kv, err := s.get()
	if err != nil {
		return false, err
	}
	return kv.Swap(ctx, key, old, val, ttl)
}

// Delete implements state.KV.
func (s *startedKV) Delete(ctx context.Context, key string) error {
	kv, err := s.get()
	if err != nil {
		return err
	}
	return kv.Delete(ctx, key)
}

// Scan implements state.KV.
func (s *startedKV) Scan(ctx context.Context, prefix string, limit int) ([]qstate.Entry, error) {
	kv, err := s.get()
	if err != nil {
		return nil, err
	}
	return kv.Scan(ctx, prefix, limit)
}

// Admit implements state.KV.
func (s *startedKV) Admit(ctx context.Context, req qstate.AdmitRequest) (qstate.AdmitResult, error) {
	kv, err := s.get()
	if err != nil {
		return qstate.AdmitResult{}, err
	}
	return kv.Admit(ctx, req)
}

// Close implements state.KV; the backend's KV is closed with the backend.
func (s *startedKV) Close() error { return nil }

// stateUnavailable is the wire error of a call refused because the state
// it needs cannot be read or written: STATE_UNAVAILABLE, retryable.
func stateUnavailable(err error) *Error {
	msg := "the state backend is unavailable; nothing was done, retry later"
	if errors.Is(err, qstate.ErrTooLarge) {
		msg = "the state backend is full; nothing was done, retry later"
	}
	return newError(CodeStateUnavailable, "%s", msg).withCause(err)
}

// isStateUnavailable reports whether err is a state backend failure.
// A store with no room (Redis at maxmemory) is one: every record quiver
// writes is small, so ErrTooLarge from the store means it is full.
func isStateUnavailable(err error) bool {
	return errors.Is(err, qstate.ErrUnavailable) || errors.Is(err, qstate.ErrClosed) || errors.Is(err, qstate.ErrTooLarge)
}
