// Package protocol adapts quiver to the MCP revisions its clients and
// upstreams speak, so that the runtime's core calls one adapter instead of
// branching per revision. This file holds the request state of
// multi-round-trip requests (MCP 2026-07-28, SEP-2322): what quiver hands a
// client in an input_required result and takes back on its retry.
//
// The state travels through the client, so it is sealed: an HMAC-SHA256
// over its content, bound to the principal that made the request, with an
// expiry and a nonce that can be redeemed once. A tampered, foreign,
// expired or replayed state is refused before anything reaches an upstream.
package protocol

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Errors of Open. Each one is a refusal of the client's retry.
var (
	// ErrStateInvalid: the state is malformed, too large, or its seal does
	// not verify (tampered, or sealed with another key).
	ErrStateInvalid = errors.New("invalid request state")
	// ErrStateExpired: the state is past its expiry.
	ErrStateExpired = errors.New("request state expired")
	// ErrStateForeign: the state was issued to another principal.
	ErrStateForeign = errors.New("request state belongs to another caller")
	// ErrStateReplayed: the state was redeemed already.
	ErrStateReplayed = errors.New("request state already used")
)

// MaxSealedState is the largest sealed state Open reads; a longer one is
// refused before any work is done on it.
const MaxSealedState = 16 << 10

// KeySize is the size of a sealing key.
const KeySize = 32

// State is what quiver needs to resume a multi-round-trip request.
type State struct {
	// Upstream names the upstream the request went to.
	Upstream string `json:"up"`
	// Target is the tool_id, prompt id or resource URI of the request.
	Target string `json:"t"`
	// ArgsHash is the sha256 (hex) of the request's canonical arguments:
	// a retry must repeat them.
	ArgsHash string `json:"a,omitempty"`
	// Principal is the key of the principal the state was issued to.
	Principal string `json:"p"`
	// UpstreamState is the upstream's own requestState, passed back on
	// its retry.
	UpstreamState string `json:"us,omitempty"`
	// InputIDs are the ids of the input requests the client must answer.
	InputIDs []string `json:"ids,omitempty"`
	// Round counts the round trips of the request, from 1.
	Round int `json:"r"`
	// Replica names the replica holding an upstream call that waits for
	// the answers ("" when nothing is held).
	Replica string `json:"rep,omitempty"`
	// Held names the held upstream call that waits for the answers (see
	// Holds); "" when the upstream call is not held.
	Held string `json:"h,omitempty"`

	// Expires and Nonce are set by Seal.
	Expires int64  `json:"exp"`
	Nonce   string `json:"n"`
}

// SealerOptions configure a Sealer.
type SealerOptions struct {
	// TTL is how long a sealed state stays valid (default 5 minutes).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Redeemed remembers redeemed nonces (default an in-memory cache of
	// MaxRedeemed nonces).
	Redeemed Redeemed
}

// Redeemed remembers the nonces of redeemed states until they expire. A
// shared implementation (KVRedeemed) lets replicas refuse each other's
// replays.
type Redeemed interface {
	// Redeem records nonce until expires and reports whether it was new.
	// An error means it could not tell: the state must not open.
	Redeem(ctx context.Context, nonce string, expires time.Time) (bool, error)
}

// Sealer seals and opens request states with one key.
type Sealer struct {
	key      []byte
	ttl      time.Duration
	now      func() time.Time
	redeemed Redeemed
}

// NewSealer returns a Sealer with key, which must be KeySize bytes.
func NewSealer(key []byte, o SealerOptions) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("protocol: a sealing key has %d bytes, not %d", KeySize, len(key))
	}
	if o.TTL <= 0 {
		o.TTL = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Redeemed == nil {
		o.Redeemed = NewRedeemedCache(MaxRedeemed, o.Now)
	}
	return &Sealer{key: append([]byte(nil), key...), ttl: o.TTL, now: o.Now, redeemed: o.Redeemed}, nil
}

// NewKey returns a random sealing key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return k, nil
}

var b64 = base64.RawURLEncoding

// Seal stamps st with an expiry and a fresh nonce and returns it sealed:
// base64url(JSON) "." base64url(HMAC-SHA256 of that text).
func (s *Sealer) Seal(st State) (string, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", fmt.Errorf("protocol: %w", err)
	}
	st.Nonce = b64.EncodeToString(n[:])
	st.Expires = s.now().Add(s.ttl).UnixMilli()
	body, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("protocol: %w", err)
	}
	text := b64.EncodeToString(body)
	sealed := text + "." + b64.EncodeToString(s.mac(text))
	if len(sealed) > MaxSealedState {
		return "", fmt.Errorf("protocol: request state of %d bytes exceeds %d", len(sealed), MaxSealedState)
	}
	return sealed, nil
}

func (s *Sealer) mac(text string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(text))
	return m.Sum(nil)
}

// Open verifies a sealed state for principal and redeems it: a state opens
// once. The checks run in order: size, seal, expiry, principal, nonce. An
// error that is none of the ErrState* errors is the Redeemed's (the
// shared state could not be reached): the state does not open.
func (s *Sealer) Open(ctx context.Context, sealed, principal string) (State, error) {
	if len(sealed) > MaxSealedState {
		return State{}, ErrStateInvalid
	}
	text, tag, ok := strings.Cut(sealed, ".")
	if !ok {
		return State{}, ErrStateInvalid
	}
	got, err := b64.DecodeString(tag)
	if err != nil || !hmac.Equal(got, s.mac(text)) {
		return State{}, ErrStateInvalid
	}
	body, err := b64.DecodeString(text)
	if err != nil {
		return State{}, ErrStateInvalid
	}
	var st State
	if err := json.Unmarshal(body, &st); err != nil || st.Nonce == "" {
		return State{}, ErrStateInvalid
	}
	exp := time.UnixMilli(st.Expires)
	if !s.now().Before(exp) {
		return State{}, ErrStateExpired
	}
	if st.Principal != principal {
		return State{}, ErrStateForeign
	}
	fresh, err := s.redeemed.Redeem(ctx, st.Nonce, exp)
	if err != nil {
		return State{}, fmt.Errorf("protocol: redeeming a request state: %w", err)
	}
	if !fresh {
		return State{}, ErrStateReplayed
	}
	return st, nil
}

// MaxRedeemed bounds the nonces the in-memory cache keeps; past it the
// soonest to expire are forgotten first, and a state whose nonce was
// forgotten early could be replayed once within its expiry. Sized so that
// hundreds of retries a second over a 5-minute TTL fit.
const MaxRedeemed = 1 << 18

// RedeemedCache is the in-memory Redeemed of one process.
type RedeemedCache struct {
	mu    sync.Mutex
	max   int
	now   func() time.Time
	until map[string]time.Time
}

// NewRedeemedCache returns a cache of at most max nonces.
func NewRedeemedCache(max int, now func() time.Time) *RedeemedCache {
	if now == nil {
		now = time.Now
	}
	return &RedeemedCache{max: max, now: now, until: map[string]time.Time{}}
}

// Redeem implements Redeemed.
func (c *RedeemedCache) Redeem(_ context.Context, nonce string, expires time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, seen := c.until[nonce]; seen {
		return false, nil
	}
	if len(c.until) >= c.max {
		c.sweep()
	}
	c.until[nonce] = expires
	return true, nil
}

// KVRedeemed is the Redeemed of every process sharing a state.KV: a nonce
// is redeemed by creating "mrtr/nonce/<nonce>" with the state's remaining
// lifetime as TTL, so a state redeemed on one replica cannot be redeemed
// on another.
type KVRedeemed struct {
	// KV is the shared store.
	KV state.KV
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Redeem implements Redeemed.
func (k KVRedeemed) Redeem(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	ttl := expires.Sub(now())
	if ttl <= 0 {
		return false, nil
	}
	sum := sha256.Sum256([]byte(nonce))
	ok, err := k.KV.Create(ctx, "mrtr/nonce/"+hex.EncodeToString(sum[:16]), []byte{1}, ttl)
	if err != nil {
		return false, fmt.Errorf("protocol: %w", err)
	}
	return ok, nil
}

// sweep drops expired nonces, and when that is not enough the half that
// expires soonest.
func (c *RedeemedCache) sweep() {
	now := c.now()
	for n, t := range c.until {
		if !now.Before(t) {
			delete(c.until, n)
		}
	}
	if len(c.until) < c.max {
		return
	}
	times := make([]time.Time, 0, len(c.until))
	for _, t := range c.until {
		times = append(times, t)
	}
	cut := median(times)
	for n, t := range c.until {
		if !t.After(cut) {
			delete(c.until, n)
		}
	}
}

// median returns the middle time of ts (which it reorders). Sorting is
// cheap enough: a sweep happens at most once per max/2 redemptions.
func median(ts []time.Time) time.Time {
	slices.SortFunc(ts, time.Time.Compare)
	return ts[len(ts)/2]
}
