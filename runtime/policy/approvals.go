package policy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/quiver-mcp/quiver/runtime/identity"
)

// DefaultApprovalTTL is how long a pending approval waits for an operator,
// and how long a granted one may be used.
const DefaultApprovalTTL = 15 * time.Minute

// DefaultMaxPending bounds the pending approvals of one principal.
const DefaultMaxPending = 100

// approvalsFile is the journal of an approval store's directory.
const approvalsFile = "approvals.jsonl"

// Errors of the approval store.
var (
	ErrApprovalNotFound = errors.New("no such approval")
	ErrApprovalExpired  = errors.New("approval expired")
	ErrApprovalDecided  = errors.New("approval already decided")
	ErrTooManyPending   = errors.New("too many pending approvals for this principal")
	ErrNotPersisted     = errors.New("change applied in memory but not persisted")
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
	ID           string         `json:"approval_id"`
	PrincipalKey string         `json:"principal_key"`
	Sub          string         `json:"sub"`
	ToolID       string         `json:"tool_id"`
	ArgsHash     string         `json:"args_hash"`
	Status       ApprovalStatus `json:"status"`
	RequestedAt  time.Time      `json:"requested_at"`
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
	// Dir, when set, persists approvals as a JSONL journal
	// (Dir/approvals.jsonl) that survives restarts; "" keeps them in
	// memory.
	Dir string
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
// it (Grant, through the admin API); the principal's retried call, with
// the same tool and the same argument hash, then passes Check exactly
// once. Approvals are single-use with a TTL: a granted approval is
// consumed by the first Check that finds it, and lapses unused TTL after
// the grant; a pending one lapses TTL after the request. It is safe for
// concurrent use and holds no goroutine.
type Approvals struct {
	o       ApprovalOptions
	mu      sync.Mutex
	byID    map[string]*Approval
	journal *os.File // nil in memory
	swept   time.Time
}

// OpenApprovals opens the store, replaying and compacting its journal
// when Dir is set.
func OpenApprovals(o ApprovalOptions) (*Approvals, error) {
	if o.TTL <= 0 {
		o.TTL = DefaultApprovalTTL
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Approvals{o: o, byID: map[string]*Approval{}}
	if o.Dir == "" {
		return a, nil
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	path := filepath.Join(o.Dir, approvalsFile)
	if err := a.replay(path); err != nil {
		return nil, err
	}
	if err := a.compact(path); err != nil {
		return nil, err
	}
	return a, nil
}

// replay reads the journal: the last record of each id wins. A torn last
// line (a crash mid-write) is ignored; a bad line elsewhere is an error.
func (a *Approvals) replay(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	var bad error
	for sc.Scan() {
		line++
		if bad != nil {
			return bad
		}
		var rec Approval
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.ID == "" {
			bad = fmt.Errorf("approvals: %s line %d is not an approval record", path, line)
			continue
		}
		a.byID[rec.ID] = &rec
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("approvals: reading %s: %w", path, err)
	}
	return nil
}

// compact rewrites the journal with the live approvals only and opens it
// for appending.
func (a *Approvals) compact(path string) error {
	now := a.o.Now()
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	w := bufio.NewWriter(f)
	for id, rec := range a.byID {
		if !a.live(rec, now) {
			delete(a.byID, id)
			continue
		}
		b, _ := json.Marshal(rec)
		_, _ = w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("approvals: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("approvals: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	syncDir(filepath.Dir(path))
	a.journal, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	return nil
}

// live reports whether a record is still worth keeping: pending or
// granted and not expired, or decided within the last TTL (so that
// operators and retries can still see what happened).
func (a *Approvals) live(rec *Approval, now time.Time) bool {
	switch rec.Status {
	case ApprovalPending, ApprovalGranted:
		return now.Before(rec.ExpiresAt.Add(a.o.TTL))
	}
	last := rec.DecidedAt
	if rec.UsedAt.After(last) {
		last = rec.UsedAt
	}
	return now.Before(last.Add(a.o.TTL))
}

// Close closes the journal.
func (a *Approvals) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.journal == nil {
		return nil
	}
	err := a.journal.Close()
	a.journal = nil
	return err
}

// persist appends rec to the journal (under a.mu).
func (a *Approvals) persist(rec *Approval) error {
	if a.journal == nil {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	if _, err := a.journal.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	if err := a.journal.Sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	return nil
}

// sweep drops dead records from memory, at most once a minute (under
// a.mu).
func (a *Approvals) sweep(now time.Time) {
	if now.Sub(a.swept) < time.Minute {
		return
	}
	a.swept = now
	for id, rec := range a.byID {
		if !a.live(rec, now) {
			delete(a.byID, id)
		}
	}
}

// find returns the newest record for (principal, tool, args) that is
// pending or granted and not expired (under a.mu).
func (a *Approvals) find(key, toolID, argsHash string, now time.Time) *Approval {
	var best *Approval
	for _, rec := range a.byID {
		if rec.PrincipalKey != key || rec.ToolID != toolID || rec.ArgsHash != argsHash || rec.Expired(now) {
			continue
		}
		if rec.Status != ApprovalPending && rec.Status != ApprovalGranted {
			continue
		}
		if best == nil || rec.RequestedAt.After(best.RequestedAt) {
			best = rec
		}
	}
	return best
}

// Request asks for an approval of one call and returns it. While an
// earlier request for the same principal, tool and argument hash is
// still pending or granted, Request returns that one instead of a new
// one, so a retried call does not pile up requests. An error that
// matches ErrNotPersisted comes with a usable approval.
func (a *Approvals) Request(p identity.Principal, toolID, argsHash string) (Approval, error) {
	key := p.Key()
	if key == "" {
		return Approval{}, errors.New("approvals: a request needs a principal")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.o.Now()
	a.sweep(now)
	if rec := a.find(key, toolID, argsHash, now); rec != nil {
		return *rec, nil
	}
	pending := 0
	for _, rec := range a.byID {
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
	rec := &Approval{ID: id.String(), PrincipalKey: key, Sub: p.Sub, ToolID: toolID, ArgsHash: argsHash,
		Status: ApprovalPending, RequestedAt: now, ExpiresAt: now.Add(a.o.TTL)}
	a.byID[rec.ID] = rec
	return *rec, a.persist(rec)
}

// Grant records that operator approved the request id at the given time;
// the approval can then be used once within TTL of at.
func (a *Approvals) Grant(id, operator string, at time.Time) (Approval, error) {
	return a.decide(id, operator, at, ApprovalGranted)
}

// Deny records that operator refused the request id.
func (a *Approvals) Deny(id, operator string, at time.Time) (Approval, error) {
	return a.decide(id, operator, at, ApprovalDenied)
}

func (a *Approvals) decide(id, operator string, at time.Time, st ApprovalStatus) (Approval, error) {
	if operator == "" {
		return Approval{}, errors.New("approvals: a decision needs an operator")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.byID[id]
	if !ok {
		return Approval{}, fmt.Errorf("%w: %q", ErrApprovalNotFound, id)
	}
	if rec.Status != ApprovalPending {
		return *rec, fmt.Errorf("%w: %s is %s", ErrApprovalDecided, id, rec.Status)
	}
	if rec.Expired(a.o.Now()) || !at.Before(rec.ExpiresAt) {
		return *rec, fmt.Errorf("%w: %s lapsed at %s", ErrApprovalExpired, id, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	rec.Status, rec.DecidedBy, rec.DecidedAt = st, operator, at
	if st == ApprovalGranted {
		rec.ExpiresAt = at.Add(a.o.TTL)
	}
	return *rec, a.persist(rec)
}

// Check reports whether a granted, unused, unexpired approval exists for
// this principal, tool and argument hash, and consumes it: the next Check
// for the same call is false again. Without a granted approval it returns
// false and the pending approval, if any (zero otherwise). Call it right
// before dispatching the call the approval is for.
func (a *Approvals) Check(p identity.Principal, toolID, argsHash string) (bool, Approval) {
	key := p.Key()
	if key == "" {
		return false, Approval{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.o.Now()
	rec := a.find(key, toolID, argsHash, now)
	if rec == nil {
		return false, Approval{}
	}
	if rec.Status != ApprovalGranted {
		return false, *rec
	}
	rec.Status, rec.UsedAt = ApprovalUsed, now
	// The call must not fail because the journal did: the approval is
	// consumed in memory either way. (If the write failed, a restart
	// within the TTL would see it granted once more.)
	_ = a.persist(rec)
	return true, *rec
}

// Get returns the approval id.
func (a *Approvals) Get(id string) (Approval, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.byID[id]
	if !ok {
		return Approval{}, false
	}
	return *rec, true
}

// Pending returns the pending, unexpired approvals, oldest first.
func (a *Approvals) Pending() []Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.o.Now()
	var out []Approval
	for _, rec := range a.byID {
		if rec.Status == ApprovalPending && !rec.Expired(now) {
			out = append(out, *rec)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].RequestedAt.Equal(out[j].RequestedAt) {
			return out[i].RequestedAt.Before(out[j].RequestedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// syncDir fsyncs a directory so a rename in it is durable; failures are
// ignored (not every file system supports it).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
