package guard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiver-mcp/quiver/runtime/codes"
	"github.com/quiver-mcp/quiver/runtime/state"
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

// IdempotencyOptions configure NewIdempotency.
type IdempotencyOptions struct {
	// KV holds the records; every process sharing it shares them. Required.
	KV state.KV
	// TTL is how long a record is kept (DefaultIdempotencyTTL when zero).
	TTL time.Duration
	// PendingTimeout is how long a call may run (DefaultPendingTimeout
	// when zero). A reservation still pending after it was left by a
	// process that died mid-call: its key is IDEMPOTENCY_OUTCOME_UNKNOWN,
	// never dispatched again, rather than IN_PROGRESS for the whole TTL.
	PendingTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultPendingTimeout is IdempotencyOptions.PendingTimeout's default.
const DefaultPendingTimeout = 15 * time.Minute

// IdempotencyStore keeps one record per {principal, idempotency key} in a
// state.KV: the fingerprint of the call (tool and arguments) and, once it
// finished, its result. Keys and principals are stored only as a sha256.
//
// The store gives at-most-once dispatch per key across every process that
// shares the KV: a record is reserved (pending, with a random reservation
// token) by an atomic Create before the call is sent, so a concurrent or
// later call with the same key never dispatches again. A call that was sent
// but whose outcome is unknown (timeout, cancellation) leaves its key
// unusable rather than risk a second side effect.
type IdempotencyStore struct {
	kv      state.KV
	ttl     time.Duration
	pending time.Duration
	now     func() time.Time
}

// NewIdempotency returns the store on o.KV.
func NewIdempotency(o IdempotencyOptions) (*IdempotencyStore, error) {
	if o.KV == nil {
		return nil, errors.New("idempotency store: KV is required")
	}
	if o.TTL <= 0 {
		o.TTL = DefaultIdempotencyTTL
	}
	if o.PendingTimeout <= 0 {
		o.PendingTimeout = DefaultPendingTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &IdempotencyStore{kv: o.KV, ttl: o.TTL, pending: o.PendingTimeout, now: o.Now}, nil
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
	Token       string          `json:"token,omitempty"`
	Created     int64           `json:"created"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	FirstError  string          `json:"first_error,omitempty"`
}

// Reservation is the outcome of Begin: either a fresh reservation the
// caller must finish with Complete, Abandon or Release, or a replay of a
// finished call (Replay set).
type Reservation struct {
	key         string
	fingerprint string
	pending     []byte // the stored pending record, byte for byte
	// Replay is the stored payload of the finished call with the same key
	// and fingerprint; nil for a fresh reservation.
	Replay json.RawMessage
}

func recordKey(principal, key string) string {
	h := sha256.New()
	h.Write([]byte(principal))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return "idem/" + hex.EncodeToString(h.Sum(nil))
}

// Begin looks up {principal, key}. A new key is reserved for fingerprint.
// A key whose call finished with the same fingerprint is a replay. A key
// used with another fingerprint is IDEMPOTENCY_KEY_REUSED; one whose call
// runs now (in any process) is IDEMPOTENCY_KEY_IN_PROGRESS (retryable); one
// whose call was sent with an unknown outcome is IDEMPOTENCY_OUTCOME_UNKNOWN.
// An error (state.ErrUnavailable among others) means nothing was reserved:
// the call must not be dispatched.
func (s *IdempotencyStore) Begin(ctx context.Context, principal, key, fingerprint string) (*Reservation, *Error, error) {
	k := recordKey(principal, key)
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, nil, fmt.Errorf("idempotency store: %w", err)
	}
	pending, err := json.Marshal(record{State: statePending, Fingerprint: fingerprint, Token: hex.EncodeToString(tok[:]), Created: s.now().UnixNano()})
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency store: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		ok, err := s.kv.Create(ctx, k, pending, s.ttl)
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency store: %w", err)
		}
		if ok {
			return &Reservation{key: k, fingerprint: fingerprint, pending: pending}, nil, nil
		}
		rec, found, err := s.get(ctx, k)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			continue // released or expired in between: try again
		}
		replay, refusal := s.judgeRecord(rec, fingerprint)
		if refusal != nil {
			return nil, refusal, nil
		}
		return &Reservation{key: k, fingerprint: fingerprint, Replay: replay}, nil, nil
	}
}

// Peek is Begin without reserving anything (dry runs): replay is true when
// the key's call finished with the same fingerprint.
func (s *IdempotencyStore) Peek(ctx context.Context, principal, key, fingerprint string) (replay bool, refusal *Error, err error) {
	rec, found, err := s.get(ctx, recordKey(principal, key))
	if err != nil || !found {
		return false, nil, err
	}
	payload, refusal := s.judgeRecord(rec, fingerprint)
	return payload != nil, refusal, nil
}

func (s *IdempotencyStore) get(ctx context.Context, k string) (record, bool, error) {
	var rec record
	b, err := s.kv.Get(ctx, k)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return rec, false, nil
	case err != nil:
		return rec, false, fmt.Errorf("idempotency store: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("idempotency store: corrupt record: %w", err)
	}
	return rec, true, nil
}

// judgeRecord decides what an existing record means for a call with fingerprint.
func (s *IdempotencyStore) judgeRecord(rec record, fingerprint string) (json.RawMessage, *Error) {
	switch {
	case rec.Fingerprint != fingerprint:
		return nil, deny(codes.IdempotencyKeyReused, "this idempotency_key was used for another call (another tool or other arguments); use a new key").at("idempotency_key")
	case rec.State == stateDone:
		if len(rec.Payload) == 0 {
			return json.RawMessage("{}"), nil
		}
		return rec.Payload, nil
	case rec.State == statePending && s.now().Sub(time.Unix(0, rec.Created)) < s.pending:
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

// ErrReservationLost reports a reservation whose pending record is gone or
// was replaced (it expired, or the store lost it) when the call finished.
var ErrReservationLost = errors.New("idempotency store: reservation lost")

// Complete records the finished call's payload: later calls with the same
// key and fingerprint replay it.
func (s *IdempotencyStore) Complete(ctx context.Context, r *Reservation, payload []byte) error {
	return s.finish(ctx, r, record{State: stateDone, Fingerprint: r.fingerprint, Created: s.now().UnixNano(), Payload: payload})
}

// Abandon records that the call was sent but its outcome is unknown
// (firstError is the wire code it failed with): the key is never
// dispatched again.
func (s *IdempotencyStore) Abandon(ctx context.Context, r *Reservation, firstError string) error {
	return s.finish(ctx, r, record{State: stateUnknown, Fingerprint: r.fingerprint, Created: s.now().UnixNano(), FirstError: firstError})
}

// Release forgets the reservation: the call certainly had no effect (it
// was never sent, or the upstream refused it), so the key may be used again.
// Like Complete and Abandon it runs even when ctx is done: a reservation
// must not outlive its call.
func (s *IdempotencyStore) Release(ctx context.Context, r *Reservation) error {
	return s.swap(ctx, r, nil)
}

func (s *IdempotencyStore) finish(ctx context.Context, r *Reservation, rec record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return s.swap(ctx, r, v)
}

// swap replaces the reservation's pending record with v (nil deletes it).
// A finished call is recorded even when the caller's context is done: the
// effect happened either way.
func (s *IdempotencyStore) swap(ctx context.Context, r *Reservation, v []byte) error {
	if r == nil || r.pending == nil {
		return errors.New("idempotency store: not a fresh reservation")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ok, err := s.kv.Swap(ctx, r.key, r.pending, v, s.ttl)
	if err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	if !ok {
		return ErrReservationLost
	}
	return nil
}
