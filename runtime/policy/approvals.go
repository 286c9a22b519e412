package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// DefaultApprovalTTL is how long a pending approval waits for an operator,
// and how long a granted one may be used.
const DefaultApprovalTTL = 15 * time.Minute

// DefaultMaxPending bounds the pending approvals of one principal.
const DefaultMaxPending = 100

// Keys of the approval store in its state.KV.
const (
	// approvalPrefix + id holds one approval as JSON.
	approvalPrefix = "approval/"
	// approvalCallPrefix + sha256(principal key, tool, args hash) holds
	// the id of the newest approval for that call.
	approvalCallPrefix = "approval-call/"
)

// Errors of the approval store.
var (
	ErrApprovalNotFound = errors.New("no such approval")
	ErrApprovalExpired  = errors.New("approval expired")
	ErrApprovalDecided  = errors.New("approval already decided")
	ErrTooManyPending   = errors.New("too many pending approvals for this principal")
)

// ApprovalStatus is the state of an approval.
type ApprovalStatus string

// Approval states: pending -> granted -> used, or pending -> denied;
// pending and granted approvals expire.
const (
	ApprovalPending ApprovalStatus = "pending"
	ApprovalGranted ApprovalStatus = "granted"
	ApprovalDenied  ApprovalStatus = "denied"
	ApprovalUsed    ApprovalStatus = "used"
)

// Approval is one request for an operator's approval of one call: one
// principal, one tool, one argument hash.
type Approval struct {
	ID           string `json:"approval_id"`
	PrincipalKey string `json:"principal_key"`
	Sub          string `json:"sub"`
	ToolID       string `json:"tool_id"`
	ArgsHash     string `json:"args_hash"`
	// Reason says why the call needs an approval (the policy rule and its
	// reason codes, or what a capability request asks), for the operator.
	Reason      string         `json:"reason,omitempty"`
	Status      ApprovalStatus `json:"status"`
	RequestedAt time.Time      `json:"requested_at"`
	// ExpiresAt is when a pending approval lapses (RequestedAt + TTL), or
	// a granted one can no longer be used (DecidedAt + TTL).
	ExpiresAt time.Time `json:"expires_at"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	UsedAt    time.Time `json:"used_at,omitzero"`
}

// Expired reports whether a is pending or granted and past its expiry.
func (a Approval) Expired(now time.Time) bool {
	return (a.Status == ApprovalPending || a.Status == ApprovalGranted) && !now.Before(a.ExpiresAt)
}

// ApprovalOptions configure an approval store.
type ApprovalOptions struct {
	// KV holds the approvals; every process sharing it shares them.
	// Required.
	KV state.KV
	// TTL of pending and of granted approvals (default 15 min).
	TTL time.Duration
	// MaxPending bounds the pending approvals of one principal (default
	// 100).
	MaxPending int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Approvals is the approval store. A call whose decision is
// require_approval asks for an approval with Request; an operator grants
// it (Grant, through the admin API of any process); the principal's
// retried call, with the same tool and the same argument hash, then passes
// Check exactly once, across every process sharing the KV: consuming is a
// Swap of the granted record for the used one. Approvals are single-use
// with a TTL: a granted approval is consumed by the first Check that finds
// it, and lapses unused TTL after the grant; a pending one lapses TTL
// after the request. Every method that reads the KV returns its error
// (state.ErrUnavailable among others): callers deny. It is safe for
// concurrent use and holds no goroutine.
type Approvals struct {
	o ApprovalOptions
}

// NewApprovals returns the store on o.KV.
func NewApprovals(o ApprovalOptions) (*Approvals, error) {
	if o.KV == nil {
		return nil, errors.New("approvals: KV is required")
	}
	if o.TTL <= 0 {
		o.TTL = DefaultApprovalTTL
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Approvals{o: o}, nil
}

// keep is how long a record stays in the KV: while it is pending or
// granted plus TTL, or TTL after it was decided or used (so that
// operators and retries can still see what happened).
func (a *Approvals) keep(rec *Approval, now time.Time) time.Duration {
	end := rec.ExpiresAt.Add(a.o.TTL)
	switch rec.Status {
	case ApprovalDenied, ApprovalUsed:
		end = now.Add(a.o.TTL)
	}
	if d := end.Sub(now); d > time.Second {
		return d
	}
	return time.Second
}

func callKey(principalKey, toolID, argsHash string) string {
	h := sha256.New()
	for _, s := range []string{principalKey, toolID, argsHash} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return approvalCallPrefix + hex.EncodeToString(h.Sum(nil))
}

// get reads approval id: the record, its stored bytes, whether it exists.
func (a *Approvals) get(ctx context.Context, id string) (Approval, []byte, bool, error) {
	var rec Approval
	if id == "" || len(id) > 128 {
		return rec, nil, false, nil
	}
	raw, err := a.o.KV.Get(ctx, approvalPrefix+id)
	if errors.Is(err, state.ErrNotFound) {
		return rec, nil, false, nil
	}
	if err != nil {
		return rec, nil, false, fmt.Errorf("approvals: %w", err)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, nil, false, fmt.Errorf("approvals: record %s: %w", id, err)
	}
	return rec, raw, true, nil
}

// find returns the newest approval for (principal, tool, args) when it is
// pending or granted and not expired, with its stored bytes.
func (a *Approvals) find(ctx context.Context, key, toolID, argsHash string, now time.Time) (Approval, []byte, bool, error) {
	id, err := a.o.KV.Get(ctx, callKey(key, toolID, argsHash))
	if errors.Is(err, state.ErrNotFound) {
		return Approval{}, nil, false, nil
	}
	if err != nil {
		return Approval{}, nil, false, fmt.Errorf("approvals: %w", err)
	}
	rec, raw, ok, err := a.get(ctx, string(id))
	if err != nil || !ok {
		return Approval{}, nil, false, err
	}
	if rec.PrincipalKey != key || rec.ToolID != toolID || rec.ArgsHash != argsHash || rec.Expired(now) ||
		(rec.Status != ApprovalPending && rec.Status != ApprovalGranted) {
		return Approval{}, nil, false, nil
	}
	return rec, raw, true, nil
}

// all returns every stored approval (up to state.MaxScan).
func (a *Approvals) all(ctx context.Context) ([]Approval, error) {
	entries, err := a.o.KV.Scan(ctx, approvalPrefix, state.MaxScan)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	out := make([]Approval, 0, len(entries))
	for _, e := range entries {
		var rec Approval
		if json.Unmarshal(e.Value, &rec) == nil && rec.ID != "" {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Request asks for an approval of one call and returns it; reason is
// shown to the operator. While an earlier request for the same principal,
// tool and argument hash is still pending or granted, Request returns
// that one instead of a new one, so a retried call does not pile up
// requests.
func (a *Approvals) Request(ctx context.Context, p identity.Principal, toolID, argsHash, reason string) (Approval, error) {
	key := p.Key()
	if key == "" {
		return Approval{}, errors.New("approvals: a request needs a principal")
	}
	ck := callKey(key, toolID, argsHash)
	for {
		now := a.o.Now()
		if rec, _, ok, err := a.find(ctx, key, toolID, argsHash, now); err != nil || ok {
			return rec, err
		}
		prev, err := a.o.KV.Get(ctx, ck)
		switch {
		case errors.Is(err, state.ErrNotFound):
			prev = nil
		case err != nil:
			return Approval{}, fmt.Errorf("approvals: %w", err)
		}
		recs, err := a.all(ctx)
		if err != nil {
			return Approval{}, err
		}
		pending := 0
		for _, rec := range recs {
			if rec.PrincipalKey == key && rec.Status == ApprovalPending && !rec.Expired(now) {
				pending++
			}
		}
		if pending >= a.o.MaxPending {
			return Approval{}, ErrTooManyPending
		}
		id, err := uuid.NewV7()
		if err != nil {
			return Approval{}, fmt.Errorf("approvals: %w", err)
		}
		rec := Approval{ID: id.String(), PrincipalKey: key, Sub: p.Sub, ToolID: toolID, ArgsHash: argsHash, Reason: reason,
			Status: ApprovalPending, RequestedAt: now, ExpiresAt: now.Add(a.o.TTL)}
		raw, err := json.Marshal(rec)
		if err != nil {
			return Approval{}, fmt.Errorf("approvals: %w", err)
		}
		ttl := a.keep(&rec, now)
		if _, err := a.o.KV.Create(ctx, approvalPrefix+rec.ID, raw, ttl); err != nil {
			return Approval{}, fmt.Errorf("approvals: %w", err)
		}
		ok, err := a.o.KV.Swap(ctx, ck, prev, []byte(rec.ID), ttl)
		if err != nil {
			return Approval{}, fmt.Errorf("approvals: %w", err)
		}
		if ok {
			return rec, nil
		}
		// Another process asked for the same call in between: use its.
		_ = a.o.KV.Delete(ctx, approvalPrefix+rec.ID)
	}
}

// Grant records that operator approved the request id at the given time;
// the approval can then be used once within TTL of at.
func (a *Approvals) Grant(ctx context.Context, id, operator string, at time.Time) (Approval, error) {
	return a.decide(ctx, id, operator, at, ApprovalGranted)
}

// Deny records that operator refused the request id.
func (a *Approvals) Deny(ctx context.Context, id, operator string, at time.Time) (Approval, error) {
	return a.decide(ctx, id, operator, at, ApprovalDenied)
}

func (a *Approvals) decide(ctx context.Context, id, operator string, at time.Time, st ApprovalStatus) (Approval, error) {
	if operator == "" {
		return Approval{}, errors.New("approvals: a decision needs an operator")
	}
	for {
		rec, raw, ok, err := a.get(ctx, id)
		if err != nil {
			return Approval{}, err
		}
		if !ok {
			return Approval{}, fmt.Errorf("%w: %q", ErrApprovalNotFound, id)
		}
		if rec.Status != ApprovalPending {
			return rec, fmt.Errorf("%w: %s is %s", ErrApprovalDecided, id, rec.Status)
		}
		now := a.o.Now()
		if rec.Expired(now) || !at.Before(rec.ExpiresAt) {
			return rec, fmt.Errorf("%w: %s lapsed at %s", ErrApprovalExpired, id, rec.ExpiresAt.UTC().Format(time.RFC3339))
		}
		rec.Status, rec.DecidedBy, rec.DecidedAt = st, operator, at
		if st == ApprovalGranted {
			rec.ExpiresAt = at.Add(a.o.TTL)
		}
		if ok, err := a.swap(ctx, &rec, raw, now); err != nil || ok {
			return rec, err
		}
	}
}

// swap stores rec in place of the bytes old, and reports whether it did.
func (a *Approvals) swap(ctx context.Context, rec *Approval, old []byte, now time.Time) (bool, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("approvals: %w", err)
	}
	ok, err := a.o.KV.Swap(ctx, approvalPrefix+rec.ID, old, raw, a.keep(rec, now))
	if err != nil {
		return false, fmt.Errorf("approvals: %w", err)
	}
	return ok, nil
}

// Check reports whether a granted, unused, unexpired approval exists for
// this principal, tool and argument hash, and consumes it: the next Check
// for the same call, in any process sharing the KV, is false again.
// Without a granted approval it returns false and the pending approval, if
// any (zero otherwise). An error means the store could not be asked: the
// answer is false. Call it right before dispatching the call the approval
// is for.
func (a *Approvals) Check(ctx context.Context, p identity.Principal, toolID, argsHash string) (bool, Approval, error) {
	key := p.Key()
	if key == "" {
		return false, Approval{}, nil
	}
	for {
		now := a.o.Now()
		rec, raw, ok, err := a.find(ctx, key, toolID, argsHash, now)
		if err != nil || !ok {
			return false, Approval{}, err
		}
		if rec.Status != ApprovalGranted {
			return false, rec, nil
		}
		rec.Status, rec.UsedAt = ApprovalUsed, now
		ok, err = a.swap(ctx, &rec, raw, now)
		if err != nil {
			return false, Approval{}, err
		}
		if ok {
			return true, rec, nil
		}
		// Changed in between (consumed elsewhere): look again.
	}
}

// Get returns the approval id.
func (a *Approvals) Get(ctx context.Context, id string) (Approval, bool, error) {
	rec, _, ok, err := a.get(ctx, id)
	return rec, ok, err
}

// Pending returns the pending, unexpired approvals, oldest first.
func (a *Approvals) Pending(ctx context.Context) ([]Approval, error) {
	recs, err := a.all(ctx)
	if err != nil {
		return nil, err
	}
	now := a.o.Now()
	out := []Approval{}
	for _, rec := range recs {
		if rec.Status == ApprovalPending && !rec.Expired(now) {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].RequestedAt.Equal(out[j].RequestedAt) {
			return out[i].RequestedAt.Before(out[j].RequestedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
