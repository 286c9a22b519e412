package capability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Keys of the capability state in its state.KV.
const (
	grantPrefix      = "capability/grant/"
	replayPrefix     = "capability/proof/"
	usesPrefix       = "capability/uses/"
	revokedJTI       = "capability/revoked/jti/"
	revokedHolder    = "capability/revoked/holder/"
	revokedKey       = "capability/revoked/kid/"
	requestPrefix    = "capability/request/"
	revocationPrefix = "capability/revoked/"
)

// Record is what the gateway keeps of a token it issued: never the token
// text.
type Record struct {
	JTI       string    `json:"jti"`
	KID       string    `json:"kid"`
	Holder    string    `json:"holder"`
	JKT       string    `json:"jkt"`
	Tools     []string  `json:"tools"`
	NotBefore time.Time `json:"nbf"`
	ExpiresAt time.Time `json:"exp"`
	MaxUses   int       `json:"max_uses,omitempty"`
	Session   bool      `json:"session_bound,omitempty"`
	Parent    string    `json:"parent,omitempty"`
	Chain     []string  `json:"chain,omitempty"`
	IssuedAt  time.Time `json:"issued_at"`
	// GrantedBy is "policy" for a grant at once, the operator for an
	// approved request, the holder of the parent for an attenuation.
	GrantedBy string `json:"granted_by"`
}

// RecordOf describes claims signed with kid.
func RecordOf(c *Claims, kid, grantedBy string) Record {
	return Record{JTI: c.ID, KID: kid, Holder: c.Subject, JKT: c.Cnf.JKT, Tools: c.Tools, NotBefore: c.NotBefore.Time,
		ExpiresAt: c.ExpiresAt.Time, MaxUses: c.MaxUses, Session: c.Session != "", Parent: c.Parent, Chain: c.Chain,
		IssuedAt: c.IssuedAt.Time, GrantedBy: grantedBy}
}

// Revocation is one entry of the revocation list.
type Revocation struct {
	// Kind is jti, holder or kid; Subject the revoked one.
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason,omitempty"`
}

// Store keeps the capability state in a state.KV shared by every replica:
// the records of issued tokens, the proof replay cache, the use counters,
// the revocation list and the requests awaiting an operator.
type Store struct {
	kv state.KV
	// maxLife is the longest a token may live: how long holder
	// revocations and revocations of unknown tokens are kept.
	maxLife time.Duration
}

// NewStore returns a Store on kv; maxLife is the longest token life the
// gateway grants.
func NewStore(kv state.KV, maxLife time.Duration) *Store {
	return &Store{kv: kv, maxLife: maxLife}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// firstUse records a proof's nonce and reports whether it is new. Nonces
// are scoped by the holder key, so holders cannot burn each other's.
func (s *Store) firstUse(ctx context.Context, jkt, jti string, ttl time.Duration) (bool, error) {
	return s.kv.Create(ctx, replayPrefix+digest(jkt+"\n"+jti), []byte{1}, ttl)
}

// maxCAS bounds the compare-and-swap rounds of one use; every round that
// fails is another caller's success, so it is reached only under absurd
// contention, which then fails closed.
const maxCAS = 1000

// use counts n uses of a token with max_uses and reports whether they
// were within the limit (nothing is counted otherwise). The counter is a
// compare-and-swap in the store, so replicas racing never admit more than
// max_uses.
func (s *Store) use(ctx context.Context, c *Claims, n int, now time.Time) (bool, error) {
	key := usesPrefix + c.ID
	ttl := ttlUntil(c.ExpiresAt.Time, now)
	for range maxCAS {
		old, err := s.kv.Get(ctx, key)
		used := 0
		switch {
		case errors.Is(err, state.ErrNotFound):
			old = nil
		case err != nil:
			return false, err
		default:
			if used, err = strconv.Atoi(string(old)); err != nil {
				return false, fmt.Errorf("capability: use counter %s: %w", c.ID, err)
			}
		}
		if used+n > c.MaxUses {
			return false, nil
		}
		ok, err := s.kv.Swap(ctx, key, old, []byte(strconv.Itoa(used+n)), ttl)
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, fmt.Errorf("capability: use counter %s: %w (contention)", c.ID, state.ErrUnavailable)
}

// Delegate takes n of a token's uses for an attenuation: they are spent
// on the parent, so a parent's children together never have more uses
// than it had. It reports false when fewer than n are left.
func (s *Store) Delegate(ctx context.Context, c *Claims, n int, now time.Time) (bool, error) {
	if c.MaxUses == 0 || n == 0 {
		return true, nil
	}
	return s.use(ctx, c, n, now)
}

// Record keeps the record of an issued token until it expires.
func (s *Store) Record(ctx context.Context, r Record, now time.Time) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, grantPrefix+r.JTI, b, ttlUntil(r.ExpiresAt, now))
}

func ttlUntil(t, now time.Time) time.Duration {
	d := t.Sub(now) + time.Minute
	if d < time.Minute {
		d = time.Minute
	}
	return d
}

// Lookup returns the record of the token jti.
func (s *Store) Lookup(ctx context.Context, jti string) (Record, bool, error) {
	if err := state.CheckKey(grantPrefix + jti); err != nil {
		return Record{}, false, nil
	}
	b, err := s.kv.Get(ctx, grantPrefix+jti)
	if errors.Is(err, state.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, false, err
	}
	return r, true, nil
}

// Records lists the live tokens (at most state.MaxScan).
func (s *Store) Records(ctx context.Context) ([]Record, error) {
	es, err := s.kv.Scan(ctx, grantPrefix, state.MaxScan)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(es))
	for _, e := range es {
		var r Record
		if json.Unmarshal(e.Value, &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// PendingRequest is what an operator sees of a capability request that
// waits for approval: the approval's id names it.
type PendingRequest struct {
	ApprovalID string    `json:"approval_id"`
	Requester  string    `json:"requester"`
	Tools      []string  `json:"tools"`
	Duration   int64     `json:"duration,omitempty"`
	MaxUses    int       `json:"max_uses,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	JKT        string    `json:"jkt"`
	At         time.Time `json:"requested_at"`
}

// SavePending keeps a pending capability request's details for operators,
// as long as its approval may wait (ttl).
func (s *Store) SavePending(ctx context.Context, p PendingRequest, ttl time.Duration) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, requestPrefix+p.ApprovalID, b, ttl)
}

// Pending returns the details of the capability request an approval is
// for.
func (s *Store) Pending(ctx context.Context, approvalID string) (PendingRequest, bool, error) {
	if state.CheckKey(requestPrefix+approvalID) != nil {
		return PendingRequest{}, false, nil
	}
	b, err := s.kv.Get(ctx, requestPrefix+approvalID)
	if errors.Is(err, state.ErrNotFound) {
		return PendingRequest{}, false, nil
	}
	if err != nil {
		return PendingRequest{}, false, err
	}
	var p PendingRequest
	if err := json.Unmarshal(b, &p); err != nil {
		return PendingRequest{}, false, err
	}
	return p, true, nil
}

// Revocation kinds.
const (
	RevokeJTI    = "jti"
	RevokeHolder = "holder"
	RevokeKey    = "kid"
)

// Revoke adds an entry to the revocation list. A jti revokes one token
// and every token attenuated from it; a holder (principal key) revokes
// every token issued to it up to now; a kid revokes every token the key
// signed. It is in force at the next call on every replica: the Validator
// reads the list on every call.
func (s *Store) Revoke(ctx context.Context, rv Revocation) error {
	var key string
	ttl := s.maxLife + time.Minute
	switch rv.Kind {
	case RevokeJTI:
		key = revokedJTI + rv.Subject
		if r, ok, err := s.Lookup(ctx, rv.Subject); err != nil {
			return err
		} else if ok {
			ttl = ttlUntil(r.ExpiresAt, rv.At)
		}
	case RevokeHolder:
		key = revokedHolder + digest(rv.Subject)
	case RevokeKey:
		key, ttl = revokedKey+rv.Subject, 0
	default:
		return fmt.Errorf("%w: revoke by jti, holder or kid, not %q", ErrMalformed, rv.Kind)
	}
	if rv.Subject == "" {
		return fmt.Errorf("%w: nothing to revoke", ErrMalformed)
	}
	if err := state.CheckKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	b, err := json.Marshal(rv)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, key, b, ttl)
}

// Revoked reports which entry of the revocation list revokes the token
// ("" when none does): its jti, an ancestor's, its holder's (for tokens
// issued up to the revocation), or its key's.
func (s *Store) Revoked(ctx context.Context, c *Claims) (string, error) {
	for _, jti := range append([]string{c.ID}, c.Chain...) {
		_, err := s.kv.Get(ctx, revokedJTI+jti)
		switch {
		case err == nil && jti == c.ID:
			return "jti " + jti, nil
		case err == nil:
			return "ancestor " + jti, nil
		case !errors.Is(err, state.ErrNotFound):
			return "", err
		}
	}
	b, err := s.kv.Get(ctx, revokedHolder+digest(c.Subject))
	switch {
	case err == nil:
		var rv Revocation
		if json.Unmarshal(b, &rv) != nil || c.IssuedAt == nil || !c.IssuedAt.After(rv.At) {
			return "holder", nil
		}
	case !errors.Is(err, state.ErrNotFound):
		return "", err
	}
	if revoked, err := s.KeyRevoked(ctx, c.kid); err != nil || revoked {
		return "key " + c.kid, err
	}
	return "", nil
}

// KeyRevoked reports whether the key kid is on the revocation list.
func (s *Store) KeyRevoked(ctx context.Context, kid string) (bool, error) {
	_, err := s.kv.Get(ctx, revokedKey+kid)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, state.ErrNotFound):
		return false, nil
	}
	return false, err
}

// Revocations lists the revocation list.
func (s *Store) Revocations(ctx context.Context) ([]Revocation, error) {
	es, err := s.kv.Scan(ctx, revocationPrefix, state.MaxScan)
	if err != nil {
		return nil, err
	}
	out := make([]Revocation, 0, len(es))
	for _, e := range es {
		var rv Revocation
		if json.Unmarshal(e.Value, &rv) == nil {
			out = append(out, rv)
		}
	}
	return out, nil
}
