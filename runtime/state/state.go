// Package state is where quiver keeps what must outlive a request and be
// shared by every process serving one fleet: idempotency records,
// approvals, the incident state (switch, kill rules, revocations), rate
// limit windows, replay caches, the exchanged-token cache and the
// artifacts the context firewall keeps out of an agent's context.
//
// Each kind of state lives in the package of its concern (guard keeps
// idempotency, policy keeps approvals and incidents, controls keeps rate
// limits, artifacts keeps artifacts) and is written once against the
// small atomic key-value interface [KV] of this package. A [Backend]
// provides a KV and an artifacts.Store:
//
//   - [OpenMemory]: one process, nothing on disk (unit tests, no state_dir).
//   - embedded: Badger under state_dir, shared by every quiver process of
//     the machine that uses the same state_dir (see OpenEmbedded).
//   - redis: a Redis server shared by replicas on many machines (package
//     redisstate).
//
// Backends fail closed: when the store cannot be reached, operations return
// an error matching [ErrUnavailable], and callers refuse what needs the
// state rather than proceed without it.
package state

import (
	"context"
	"errors"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// Sentinel errors, for errors.Is.
var (
	// ErrNotFound reports a key that does not exist or has expired.
	ErrNotFound = errors.New("state: not found")
	// ErrUnavailable reports a store that cannot be reached (the Redis
	// server is down, the embedded store's owner is gone and no process
	// has taken over yet). Nothing was written.
	ErrUnavailable = errors.New("state: store unavailable")
	// ErrTooLarge reports a key or value over the limits below, or a store
	// that has no room (Redis at maxmemory). Nothing was written.
	ErrTooLarge = errors.New("state: too large")
	// ErrInvalid reports bad input: an empty key, a negative TTL, an
	// inconsistent AdmitRequest.
	ErrInvalid = errors.New("state: invalid argument")
	// ErrClosed reports use of a store after Close.
	ErrClosed = errors.New("state: store closed")
)

// Limits on keys and values, checked before any work is done.
const (
	// MaxKeyBytes caps the length of a key.
	MaxKeyBytes = 512
	// MaxValueBytes caps the length of a value.
	MaxValueBytes = 16 << 20
	// MaxScan caps the entries one Scan returns.
	MaxScan = 10000
	// MaxAdmitKeys caps the windows one Admit checks.
	MaxAdmitKeys = 32
)

// KV is an atomic key-value store with expiry. Every operation is atomic
// with respect to every other operation on the same store, from any
// process that shares it. Implementations are safe for concurrent use.
//
// A ttl of zero means the entry does not expire; a negative ttl is
// ErrInvalid. Keys are opaque strings of at most MaxKeyBytes; values are
// at most MaxValueBytes.
type KV interface {
	// Get returns the value of key, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set writes key unconditionally.
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// Create writes key only if it does not exist, and reports whether it
	// did.
	Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error)
	// Swap replaces key's value with val only if its current value equals
	// old byte for byte, and reports whether it did. A nil old means the
	// key must not exist; a nil val deletes the key.
	Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Scan returns up to limit (at most MaxScan) live entries whose keys
	// start with prefix, in key order.
	Scan(ctx context.Context, prefix string, limit int) ([]Entry, error)
	// Admit counts calls against sliding windows: see AdmitRequest.
	Admit(ctx context.Context, req AdmitRequest) (AdmitResult, error)
	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

// Entry is one key and its value.
type Entry struct {
	Key   string
	Value []byte
}

// AdmitRequest asks whether one more call fits under every one of several
// sliding-window limits, and when Take is set, counts it in all of them.
// The check and the count are one atomic step: concurrent Admits from any
// number of processes never admit more than Limit calls into a window.
type AdmitRequest struct {
	// Keys name the windows (one per limit scope and principal).
	Keys []string
	// Limits are the calls each window admits; Limits[i] belongs to Keys[i]
	// and is at least 1.
	Limits []int
	// Window is the length of the sliding window.
	Window time.Duration
	// Now is the caller's clock. Backends shared by several machines may use
	// their own clock instead, so that replicas agree.
	Now time.Time
	// Take counts the call when it is admitted; without it Admit only checks.
	Take bool
}

// AdmitResult is Admit's answer.
type AdmitResult struct {
	// Denied is the index of the first window that refused the call, or -1
	// when every window admits it.
	Denied int
	// RetryAfter is when the refusing window admits a call again.
	RetryAfter time.Duration
}

// Backend is an opened state backend: the KV every kind of state is built
// on and the artifact store.
type Backend interface {
	// Name is "memory", "embedded" or "redis", for logs and /healthz.
	Name() string
	// KV is the shared key-value store.
	KV() KV
	// Artifacts is the shared artifact store.
	Artifacts() artifacts.Store
	// Close releases both.
	Close() error
}

// CheckKey returns ErrInvalid or ErrTooLarge for a key no backend accepts.
func CheckKey(key string) error {
	switch {
	case key == "":
		return errInvalid("empty key")
	case len(key) > MaxKeyBytes:
		return errTooLarge("key")
	}
	return nil
}

// CheckWrite returns the error every backend gives for a key, value and
// ttl it must refuse.
func CheckWrite(key string, val []byte, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if ttl < 0 {
		return errInvalid("negative ttl")
	}
	if len(val) > MaxValueBytes {
		return errTooLarge("value")
	}
	return nil
}

// CheckAdmit returns ErrInvalid for a request no backend accepts.
func CheckAdmit(req AdmitRequest) error {
	if len(req.Keys) == 0 || len(req.Keys) != len(req.Limits) || len(req.Keys) > MaxAdmitKeys {
		return errInvalid("admit: keys and limits must pair up, 1 to 32 of them")
	}
	if req.Window <= 0 {
		return errInvalid("admit: window must be positive")
	}
	for i, k := range req.Keys {
		if err := CheckKey(k); err != nil {
			return err
		}
		if req.Limits[i] < 1 {
			return errInvalid("admit: limits must be at least 1")
		}
	}
	return nil
}

// CheckScan returns ErrInvalid for a scan no backend accepts.
func CheckScan(prefix string, limit int) error {
	if len(prefix) > MaxKeyBytes {
		return errTooLarge("prefix")
	}
	if limit < 1 || limit > MaxScan {
		return errInvalid("scan: limit must be 1 to 10000")
	}
	return nil
}

type detail struct {
	base error
	msg  string
}

func (d *detail) Error() string { return d.base.Error() + ": " + d.msg }
func (d *detail) Unwrap() error { return d.base }

func errInvalid(msg string) error  { return &detail{ErrInvalid, msg} }
func errTooLarge(msg string) error { return &detail{ErrTooLarge, msg} }
