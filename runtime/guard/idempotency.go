package guard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

// DefaultIdempotencyTTL is how long an idempotency record is kept.
const DefaultIdempotencyTTL = 24 * time.Hour

// MaxIdempotencyPayload bounds the stored result of one call; a larger one
// is stored without its inline result (see IdempotencyStore.Complete).
const MaxIdempotencyPayload = 1 << 20

// Record states.
const (
	statePending = "pending" // reserved; the call is being dispatched
	stateDone    = "done"    // the call finished; Payload holds its result
	stateUnknown = "unknown" // the call was sent; its outcome is unknown
)

// IdempotencyOptions configure OpenIdempotency.
type IdempotencyOptions struct {
	// Dir holds the Badger files (created 0700). Required unless InMemory.
	Dir string
	// InMemory keeps the records in memory: nothing survives Close.
	InMemory bool
	// TTL is how long a record is kept (DefaultIdempotencyTTL when zero).
	TTL time.Duration
	// Logger receives Badger's warnings and errors.
	Logger *slog.Logger
}

// IdempotencyStore keeps one record per {principal, idempotency key} in
// Badger: the fingerprint of the call (tool and arguments) and, once it
// finished, its result. Keys and principals are stored only as a sha256.
//
// The store gives at-most-once dispatch per key: a record is reserved
// (pending) before the call is sent, so a concurrent or later call with the
// same key never dispatches again. A call that was sent but whose outcome is
// unknown (timeout, cancellation, a crash of quiver) leaves its key unusable
// rather than risk a second side effect.
type IdempotencyStore struct {
	db  *badger.DB
	ttl time.Duration
	// instance tells this process's pending records from those a previous
	// process left behind when it died.
	instance string
}

// OpenIdempotency opens (or creates) the store.
func OpenIdempotency(o IdempotencyOptions) (*IdempotencyStore, error) {
	if o.TTL <= 0 {
		o.TTL = DefaultIdempotencyTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var bo badger.Options
	switch {
	case o.InMemory && o.Dir != "":
		return nil, errors.New("idempotency store: Dir must be empty with InMemory")
	case o.InMemory:
		bo = badger.DefaultOptions("").WithInMemory(true)
	case o.Dir == "":
		return nil, errors.New("idempotency store: Dir is required")
	default:
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("idempotency store: %w", err)
		}
		// A record must be on disk before its call is answered.
		bo = badger.DefaultOptions(o.Dir).WithSyncWrites(true)
	}
	bo = bo.WithLogger(badgerLogger{o.Logger}).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(16 << 20).
		WithBlockCacheSize(0).
		WithCompression(options.None).
		WithMetricsEnabled(false)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("idempotency store: %w", err)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return &IdempotencyStore{db: db, ttl: o.TTL, instance: hex.EncodeToString(nonce[:])}, nil
}

// Close closes the store.
func (s *IdempotencyStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

// Fingerprint identifies a call for idempotency: sha256 of the server, the
// upstream tool name and the canonical JSON of the arguments (object keys
// sorted), so reordered keys are the same call and any other difference is
// not.
func Fingerprint(serverID, toolName string, args any) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(serverID))
	h.Write([]byte{0})
	h.Write([]byte(toolName))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// record is the stored value.
type record struct {
	State       string          `json:"state"`
	Fingerprint string          `json:"fingerprint"`
	Instance    string          `json:"instance,omitempty"`
	Created     int64           `json:"created"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	FirstError  string          `json:"first_error,omitempty"`
}

// Reservation is the outcome of Begin: either a fresh reservation the
// caller must finish with Complete, Abandon or Release, or a replay of a
// finished call (Replay set).
type Reservation struct {
	key         []byte
	fingerprint string
	// Replay is the stored payload of the finished call with the same key
	// and fingerprint; nil for a fresh reservation.
	Replay json.RawMessage
}

func recordKey(principal, key string) []byte {
	h := sha256.New()
	h.Write([]byte(principal))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return []byte("idem/" + hex.EncodeToString(h.Sum(nil)))
}

// Begin looks up {principal, key}. A new key is reserved for fingerprint.
// A key whose call finished with the same fingerprint is a replay. A key
// used with another fingerprint is IDEMPOTENCY_KEY_REUSED; one whose call
// runs now is IDEMPOTENCY_KEY_IN_PROGRESS (retryable); one whose call was
// sent with an unknown outcome (including a pending record left by a
// previous process) is IDEMPOTENCY_OUTCOME_UNKNOWN.
func (s *IdempotencyStore) Begin(ctx context.Context, principal, key, fingerprint string) (*Reservation, *Error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	k := recordKey(principal, key)
	res := &Reservation{key: k, fingerprint: fingerprint}
	var refusal *Error
	err := s.db.Update(func(txn *badger.Txn) error {
		rec, found, err := getRecord(txn, k)
		if err != nil {
			return err
		}
		if !found {
			rec := record{State: statePending, Fingerprint: fingerprint, Instance: s.instance, Created: time.Now().UnixNano()}
			return s.put(txn, k, rec)
		}
		res.Replay, refusal = s.judge(rec, fingerprint)
		return nil
	})
	if errors.Is(err, badger.ErrConflict) {
		return nil, inProgress(), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency store: %w", err)
	}
	if refusal != nil {
		return nil, refusal, nil
	}
	return res, nil, nil
}

// Peek is Begin without reserving anything (dry runs): replay is true when
// the key's call finished with the same fingerprint.
func (s *IdempotencyStore) Peek(ctx context.Context, principal, key, fingerprint string) (replay bool, refusal *Error, err error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	err = s.db.View(func(txn *badger.Txn) error {
		rec, found, err := getRecord(txn, recordKey(principal, key))
		if err != nil || !found {
			return err
		}
		var payload json.RawMessage
		payload, refusal = s.judge(rec, fingerprint)
		replay = payload != nil
		return nil
	})
	if err != nil {
		return false, nil, fmt.Errorf("idempotency store: %w", err)
	}
	return replay, refusal, nil
}

func getRecord(txn *badger.Txn, k []byte) (record, bool, error) {
	var rec record
	item, err := txn.Get(k)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return rec, false, nil
	case err != nil:
		return rec, false, err
	}
	err = item.Value(func(v []byte) error { return json.Unmarshal(v, &rec) })
	return rec, err == nil, err
}

// judge decides what an existing record means for a call with fingerprint.
func (s *IdempotencyStore) judge(rec record, fingerprint string) (json.RawMessage, *Error) {
	switch {
	case rec.Fingerprint != fingerprint:
		return nil, deny(codes.IdempotencyKeyReused, "this idempotency_key was used for another call (another tool or other arguments); use a new key").at("idempotency_key")
	case rec.State == stateDone:
		if len(rec.Payload) == 0 {
			return json.RawMessage("{}"), nil
		}
		return rec.Payload, nil
	case rec.State == statePending && rec.Instance == s.instance:
		return nil, inProgress()
	}
	e := deny(codes.IdempotencyOutcomeUnknown, "a call with this idempotency_key was sent but its outcome is unknown; it is not sent again: check the target, then use a new key").at("idempotency_key")
	if rec.FirstError != "" {
		e.with("first_error", rec.FirstError)
	}
	return nil, e
}

func inProgress() *Error {
	return deny(codes.IdempotencyKeyInProgress, "a call with this idempotency_key is running; retry when it has finished").at("idempotency_key")
}

func (s *IdempotencyStore) put(txn *badger.Txn, k []byte, rec record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.SetEntry(badger.NewEntry(k, v).WithTTL(s.ttl))
}

// Complete records the finished call's payload: later calls with the same
// key and fingerprint replay it.
func (s *IdempotencyStore) Complete(ctx context.Context, r *Reservation, payload []byte) error {
	return s.finish(ctx, r, record{State: stateDone, Fingerprint: r.fingerprint, Created: time.Now().UnixNano(), Payload: payload})
}

// Abandon records that the call was sent but its outcome is unknown
// (firstError is the wire code it failed with): the key is never
// dispatched again.
func (s *IdempotencyStore) Abandon(ctx context.Context, r *Reservation, firstError string) error {
	return s.finish(ctx, r, record{State: stateUnknown, Fingerprint: r.fingerprint, Created: time.Now().UnixNano(), FirstError: firstError})
}

// Release forgets the reservation: the call certainly had no effect (it
// was never sent, or the upstream refused it), so the key may be used again.
// Like Complete and Abandon it runs even when ctx is done: a reservation
// must not outlive its call.
func (s *IdempotencyStore) Release(_ context.Context, r *Reservation) error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(r.key) }); err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

func (s *IdempotencyStore) finish(_ context.Context, r *Reservation, rec record) error {
	// A finished call is recorded even when the caller's context is done:
	// the effect happened either way.
	if err := s.db.Update(func(txn *badger.Txn) error { return s.put(txn, r.key, rec) }); err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

// badgerLogger sends Badger's warnings and errors to slog and drops the rest.
type badgerLogger struct{ l *slog.Logger }

// Errorf logs Badger's errors.
func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error("badger (idempotency): " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Warningf logs Badger's warnings.
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger (idempotency): " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Infof drops Badger's info lines.
func (badgerLogger) Infof(string, ...any) {}

// Debugf drops Badger's debug lines.
func (badgerLogger) Debugf(string, ...any) {}
