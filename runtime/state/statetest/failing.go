package statetest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Failing wraps a KV so that a test can make every operation fail with
// state.ErrUnavailable, as a backend that lost its store does, and heal it
// again. The zero value is not usable: use NewFailing.
type Failing struct {
	state.KV
	down atomic.Bool
	with atomic.Pointer[error]
}

// NewFailing wraps kv; it starts healthy.
func NewFailing(kv state.KV) *Failing { return &Failing{KV: kv} }

// SetDown makes every later operation fail (true) or pass through (false).
func (f *Failing) SetDown(down bool) { f.down.Store(down) }

// FailWith makes the failures err instead of state.ErrUnavailable (say, an
// error wrapping state.ErrTooLarge, as a full Redis gives).
func (f *Failing) FailWith(err error) { f.with.Store(&err) }

func (f *Failing) err() error {
	if f.down.Load() {
		if p := f.with.Load(); p != nil {
			return *p
		}
		return state.ErrUnavailable
	}
	return nil
}

// Get implements state.KV.
func (f *Failing) Get(ctx context.Context, key string) ([]byte, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.KV.Get(ctx, key)
}

// Set implements state.KV.
func (f *Failing) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.KV.Set(ctx, key, val, ttl)
}

// Create implements state.KV.
func (f *Failing) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.KV.Create(ctx, key, val, ttl)
}

// Swap implements state.KV.
func (f *Failing) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	return f.KV.Swap(ctx, key, old, val, ttl)
}

// Delete implements state.KV.
func (f *Failing) Delete(ctx context.Context, key string) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.KV.Delete(ctx, key)
}

// Scan implements state.KV.
func (f *Failing) Scan(ctx context.Context, prefix string, limit int) ([]state.Entry, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.KV.Scan(ctx, prefix, limit)
}

// Admit implements state.KV.
func (f *Failing) Admit(ctx context.Context, req state.AdmitRequest) (state.AdmitResult, error) {
	if err := f.err(); err != nil {
		return state.AdmitResult{}, err
	}
	return f.KV.Admit(ctx, req)
}
