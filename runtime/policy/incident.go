package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// IncidentKey is the state.KV key that holds the whole incident state as
// JSON: one key, so that every change is one atomic Swap and every check
// one Get.
const IncidentKey = "incident"

// Reason codes of incident denials.
const (
	ReasonSessionQuarantined = "SESSION_QUARANTINED"
	ReasonPrincipalRevoked   = "PRINCIPAL_REVOKED"
	ReasonTokenRevoked       = "TOKEN_REVOKED"
	ReasonIncidentMode       = "INCIDENT_MODE"
	ReasonKillSwitch         = "KILL_SWITCH"
	// ReasonPrincipalQuarantined denies every request of a principal
	// auto-quarantined for its denial rate, until released.
	ReasonPrincipalQuarantined = "PRINCIPAL_QUARANTINED"
	// ReasonEgressBlock denies, in incident mode with its egress block
	// on, a call that reaches the network (Request.Egress).
	ReasonEgressBlock = "INCIDENT_EGRESS_BLOCK"
	// ReasonStateUnavailable denies a request because the shared state
	// that decides it cannot be read: checks fail closed.
	ReasonStateUnavailable = "STATE_UNAVAILABLE"
)

// Errors of the incident store.
var (
	ErrNotFound       = errors.New("not found")
	ErrInvalidRequest = errors.New("invalid incident request")
	ErrIncidentState  = errors.New("incident state unreadable")
)

// IncidentMode is the incident-mode switch: while Active, every tool at or
// above DenyMinRisk is denied (spec 001 conformance test 10) and receipts
// carry incident_mode true.
type IncidentMode struct {
	Active      bool   `json:"active"`
	DenyMinRisk string `json:"deny_min_risk,omitempty"`
	// EgressBlock also denies every call that reaches the network
	// (Request.Egress), whatever its risk, and makes EgressBlocked true
	// for the sandboxes' egress proxies.
	EgressBlock bool      `json:"egress_block,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	By          string    `json:"by,omitempty"`
	Since       time.Time `json:"since,omitzero"`
}

// KillRule disables matching tools at once. Every given criterion must
// hold; All matches every tool and must be the only criterion. Server,
// Namespace and ToolID hold globs.
type KillRule struct {
	ID        string    `json:"id"`
	All       bool      `json:"all,omitempty"`
	MinRisk   string    `json:"min_risk,omitempty"`
	ToolClass []string  `json:"tool_class,omitempty"`
	Server    []string  `json:"server,omitempty"`
	Namespace []string  `json:"namespace,omitempty"`
	ToolID    []string  `json:"tool_id,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	By        string    `json:"by,omitempty"`
	At        time.Time `json:"at,omitzero"`
}

// Revocation records why and until when a principal, token or session is
// cut off; a zero Until is forever.
type Revocation struct {
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	Until  time.Time `json:"until,omitzero"`
}

// activeAt reports whether the revocation holds at now.
func (r Revocation) activeAt(now time.Time) bool { return r.Until.IsZero() || now.Before(r.Until) }

// IncidentState is the whole incident state, as stored under IncidentKey.
type IncidentState struct {
	// Version counts the changes: every change stores Version+1.
	Version uint64       `json:"version"`
	Mode    IncidentMode `json:"mode"`
	Kill    []KillRule   `json:"kill"`
	// Principals are revoked by subject or by principal key
	// (identity.Principal.Key).
	Principals map[string]Revocation `json:"revoked_principals"`
	// Tokens are revoked by jti.
	Tokens map[string]Revocation `json:"revoked_tokens"`
	// Sessions are quarantined by MCP session id.
	Sessions map[string]Revocation `json:"quarantined_sessions"`
	// Quarantined are principals quarantined by principal key, by an
	// operator or for their denial rate (Denied).
	Quarantined map[string]Revocation `json:"quarantined_principals"`
}

func (s IncidentState) clone() IncidentState {
	s.Kill = slices.Clone(s.Kill)
	s.Principals = maps.Clone(s.Principals)
	s.Tokens = maps.Clone(s.Tokens)
	s.Sessions = maps.Clone(s.Sessions)
	s.Quarantined = maps.Clone(s.Quarantined)
	if s.Quarantined == nil {
		s.Quarantined = map[string]Revocation{}
	}
	if s.Principals == nil {
		s.Principals = map[string]Revocation{}
	}
	if s.Tokens == nil {
		s.Tokens = map[string]Revocation{}
	}
	if s.Sessions == nil {
		s.Sessions = map[string]Revocation{}
	}
	if s.Kill == nil {
		s.Kill = []KillRule{}
	}
	return s
}

// Denial is why the incident state refuses a request.
type Denial struct {
	Denied bool
	// Code is one of the incident reason codes.
	Code string
	// RuleID is the kill rule that matched (KILL_SWITCH only).
	RuleID string
}

// IncidentOptions configure an incident store.
type IncidentOptions struct {
	// KV holds the state under IncidentKey; every process sharing it
	// shares the kill switch, revocations and quarantines. Required.
	KV state.KV
	// Now is the clock (default time.Now).
	Now func() time.Time
	// QuarantineDenials, when above 0, quarantines a principal denied
	// that many times within QuarantineWindow (see Denied).
	QuarantineDenials int
	QuarantineWindow  time.Duration
	// OnRevoke, when set, is called after a principal or token is revoked
	// or a principal quarantined (to drop what is cached for it).
	OnRevoke func(ctx context.Context, kind RevocationKind, id string)
}

// RevocationKind names what OnRevoke is told was cut off.
type RevocationKind int

// Kinds of revocation.
const (
	// RevokedPrincipal: id is a subject or a principal key.
	RevokedPrincipal RevocationKind = iota
	// RevokedToken: id is a jti.
	RevokedToken
)

// Incident is the incident-mode state: the kill switch, revocations and
// quarantines, kept as one key of a state.KV. Every check reads the key
// and recompiles only when its bytes changed, so a change made through
// any process sharing the KV is in force for the very next check of every
// other; a check that cannot read the key fails closed (it denies with
// ReasonStateUnavailable). Changes are a Swap loop (read, apply, swap old
// for new). It is safe for concurrent use and holds no goroutine.
type Incident struct {
	o   IncidentOptions
	cur atomic.Pointer[incidentSnapshot]
}

type incidentSnapshot struct {
	failed bool   // the last read failed (WasActive reports true)
	raw    []byte // the stored bytes it was compiled from; nil: no key
	state  IncidentState
	kill   []compiledKill
}

type compiledKill struct {
	KillRule
	minRisk                   int // -1: none
	class                     map[string]bool
	server, namespace, toolID globSet
}

// NewIncident returns the store on o.KV. It does not read the KV: a check
// does, every time.
func NewIncident(o IncidentOptions) (*Incident, error) {
	if o.KV == nil {
		return nil, errors.New("incident: KV is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	in := &Incident{o: o}
	snap, err := compileIncident(IncidentState{}.clone())
	if err != nil {
		return nil, err
	}
	in.cur.Store(snap)
	return in, nil
}

// load returns the snapshot of the stored state, recompiled only when the
// stored bytes differ from the cached snapshot's. Errors match
// state.ErrUnavailable (the KV failed) or ErrIncidentState (the stored
// state is unreadable).
func (in *Incident) load(ctx context.Context) (*incidentSnapshot, error) {
	raw, err := in.o.KV.Get(ctx, IncidentKey)
	if errors.Is(err, state.ErrNotFound) {
		raw, err = nil, nil
	}
	cur := in.cur.Load()
	if err != nil {
		if !cur.failed {
			failed := *cur
			failed.failed = true
			in.cur.CompareAndSwap(cur, &failed)
		}
		return nil, fmt.Errorf("incident: %w", err)
	}
	if bytes.Equal(raw, cur.raw) && (raw == nil) == (cur.raw == nil) {
		if cur.failed {
			ok := *cur
			ok.failed = false
			in.cur.CompareAndSwap(cur, &ok)
			return &ok, nil
		}
		return cur, nil
	}
	st := IncidentState{}
	if raw != nil {
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIncidentState, err)
		}
	}
	snap, err := compileIncident(st.clone())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncidentState, err)
	}
	snap.raw = raw
	in.cur.Store(snap)
	return snap, nil
}

func compileIncident(st IncidentState) (*incidentSnapshot, error) {
	snap := &incidentSnapshot{state: st}
	for _, k := range st.Kill {
		ck, err := compileKill(k)
		if err != nil {
			return nil, fmt.Errorf("kill rule %s: %w", k.ID, err)
		}
		snap.kill = append(snap.kill, ck)
	}
	return snap, nil
}

func compileKill(k KillRule) (compiledKill, error) {
	ck := compiledKill{KillRule: k, minRisk: -1, class: set(k.ToolClass)}
	criteria := len(k.ToolClass) + len(k.Server) + len(k.Namespace) + len(k.ToolID)
	if k.MinRisk != "" {
		criteria++
		switch k.MinRisk {
		case "LOW", "MEDIUM", "HIGH", "CRITICAL":
			ck.minRisk = riskRank(k.MinRisk)
		default:
			return ck, fmt.Errorf("%w: min_risk must be LOW, MEDIUM, HIGH or CRITICAL", ErrInvalidRequest)
		}
	}
	switch {
	case k.All && criteria > 0:
		return ck, fmt.Errorf("%w: all is the only criterion of a rule that has it", ErrInvalidRequest)
	case !k.All && criteria == 0:
		return ck, fmt.Errorf("%w: a kill rule needs a criterion (min_risk, tool_class, server, namespace, tool_id) or all: true", ErrInvalidRequest)
	}
	var err error
	if ck.server, err = compileGlobs("server", k.Server); err != nil {
		return ck, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if ck.namespace, err = compileGlobs("namespace", k.Namespace); err != nil {
		return ck, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if ck.toolID, err = compileGlobs("tool_id", k.ToolID); err != nil {
		return ck, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return ck, nil
}

func (k *compiledKill) matches(req *Request) bool {
	if k.All {
		return true
	}
	if k.minRisk >= 0 && riskRank(req.Risk) < k.minRisk {
		return false
	}
	if k.class != nil && !k.class[req.ToolClass] {
		return false
	}
	if k.server != nil && !k.server.match(req.Server) {
		return false
	}
	if k.namespace != nil && !k.namespace.match(req.Namespace) {
		return false
	}
	return k.toolID == nil || k.toolID.match(req.ToolID)
}

// State returns a copy of the current state.
func (in *Incident) State(ctx context.Context) (IncidentState, error) {
	s, err := in.load(ctx)
	if err != nil {
		return IncidentState{}, err
	}
	return s.state.clone(), nil
}

// Active reports whether incident mode is on: switched on with Enable, or
// with at least one kill rule in force. Receipts record it as
// incident_mode. When the state cannot be read, it reports true: what
// the gateway does then is deny, as in an incident.
func (in *Incident) Active(ctx context.Context) bool {
	s, err := in.load(ctx)
	if err != nil {
		return true
	}
	return s.state.Mode.Active || len(s.kill) > 0
}

// WasActive is Active as of the last read of the state, without reading
// it again (receipts, which a check of the same request read just before).
// It is true after a read that failed.
func (in *Incident) WasActive() bool {
	s := in.cur.Load()
	return s.failed || s.state.Mode.Active || len(s.kill) > 0
}

// Evaluate checks req against the incident state: a quarantined session,
// a revoked principal (by subject or key) or token (by jti), incident
// mode's risk floor, then the kill rules in order. It does not look at the
// action, so it applies alike to list and call (what is denied is hidden
// too) and to an upstream's sample and elicit requests (matched by the
// upstream's server and the tool_id of the call in flight; a request
// without a risk counts as CRITICAL).
//
// When the state cannot be read it fails closed: the Denial denies with
// ReasonStateUnavailable and the error says why.
func (in *Incident) Evaluate(ctx context.Context, req Request) (Denial, error) {
	s, err := in.snapshot(ctx)
	if err != nil {
		return Denial{Denied: true, Code: ReasonStateUnavailable}, err
	}
	now := in.o.Now()
	st := &s.state
	if r, ok := st.Sessions[req.SessionID]; ok && req.SessionID != "" && r.activeAt(now) {
		return Denial{Denied: true, Code: ReasonSessionQuarantined}, nil
	}
	if p := req.Principal; !p.IsZero() {
		if r, ok := st.Principals[p.Sub]; ok && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonPrincipalRevoked}, nil
		}
		if r, ok := st.Principals[p.Key()]; ok && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonPrincipalRevoked}, nil
		}
		if r, ok := st.Tokens[p.JTI]; ok && p.JTI != "" && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonTokenRevoked}, nil
		}
		if r, ok := st.Quarantined[p.Key()]; ok && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonPrincipalQuarantined}, nil
		}
	}
	if st.Mode.Active && st.Mode.EgressBlock && req.Egress {
		return Denial{Denied: true, Code: ReasonEgressBlock}, nil
	}
	if st.Mode.Active {
		floor := st.Mode.DenyMinRisk
		if floor == "" {
			floor = "HIGH"
		}
		if riskRank(req.Risk) >= riskRank(floor) {
			return Denial{Denied: true, Code: ReasonIncidentMode}, nil
		}
	}
	for i := range s.kill {
		if s.kill[i].matches(&req) {
			return Denial{Denied: true, Code: ReasonKillSwitch, RuleID: s.kill[i].ID}, nil
		}
	}
	return Denial{}, nil
}

// Check is Evaluate as (denied, reason code); it fails closed.
func (in *Incident) Check(ctx context.Context, req Request) (bool, string) {
	d, _ := in.Evaluate(ctx, req)
	return d.Denied, d.Code
}

// Revoked reports whether the token jti, or the principal named by sub (a
// subject or a principal key), is revoked; it fits
// identity.Options.Revoked, so that revoked tokens and principals fail
// authentication. When the state cannot be read it says so with an error
// (and true, for callers that only look at the bool: fail closed).
func (in *Incident) Revoked(ctx context.Context, jti, subOrKey string) (bool, error) {
	s, err := in.snapshot(ctx)
	if err != nil {
		return true, err
	}
	now := in.o.Now()
	if r, ok := s.state.Tokens[jti]; ok && jti != "" && r.activeAt(now) {
		return true, nil
	}
	if r, ok := s.state.Principals[subOrKey]; ok && subOrKey != "" && r.activeAt(now) {
		return true, nil
	}
	return false, nil
}

// pinKey keys the snapshot Pin puts into a context, per Incident.
type pinKey struct{ in *Incident }

// pinned is one read of the state, for every check of one request.
type pinned struct {
	snap *incidentSnapshot
	err  error
}

// Pin reads the state once and returns ctx carrying that read: the checks
// made with the returned context (a listing checks every entry) use it
// instead of reading the state again, so one request costs one read and
// sees one state. A failed read is pinned too: those checks fail closed.
func (in *Incident) Pin(ctx context.Context) context.Context {
	s, err := in.load(ctx)
	return context.WithValue(ctx, pinKey{in}, pinned{s, err})
}

// snapshot is the state pinned in ctx, else a fresh read.
func (in *Incident) snapshot(ctx context.Context) (*incidentSnapshot, error) {
	if p, ok := ctx.Value(pinKey{in}).(pinned); ok {
		return p.snap, p.err
	}
	return in.load(ctx)
}

// mutate applies fn to a copy of the stored state, drops lapsed
// revocations and swaps the result in for what it read, again until no
// other process changed the state in between. The change is in force for
// every process sharing the KV once mutate returns nil.
func (in *Incident) mutate(ctx context.Context, fn func(*IncidentState) error) error {
	for {
		snap, err := in.load(ctx)
		if err != nil {
			return err
		}
		st := snap.state.clone()
		if err := fn(&st); err != nil {
			return err
		}
		now := in.o.Now()
		for _, m := range []map[string]Revocation{st.Principals, st.Tokens, st.Sessions, st.Quarantined} {
			maps.DeleteFunc(m, func(_ string, r Revocation) bool { return !r.activeAt(now) })
		}
		st.Version = snap.state.Version + 1
		next, err := compileIncident(st)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("incident: %w", err)
		}
		ok, err := in.o.KV.Swap(ctx, IncidentKey, snap.raw, raw, 0)
		if err != nil {
			return fmt.Errorf("incident: %w", err)
		}
		if ok {
			next.raw = raw
			in.cur.Store(next)
			return nil
		}
	}
}

// Enable switches incident mode on: tools at or above denyMinRisk
// (default HIGH) are denied until Disable.
func (in *Incident) Enable(ctx context.Context, by, reason, denyMinRisk string) error {
	return in.EnableMode(ctx, IncidentMode{By: by, Reason: reason, DenyMinRisk: denyMinRisk})
}

// EnableMode switches incident mode on as m says (Active, Since are set
// here): tools at or above m.DenyMinRisk (default HIGH) are denied, and
// with m.EgressBlock every call that reaches the network, until Disable.
func (in *Incident) EnableMode(ctx context.Context, m IncidentMode) error {
	by, reason, denyMinRisk := m.By, m.Reason, m.DenyMinRisk
	if denyMinRisk == "" {
		denyMinRisk = "HIGH"
	}
	switch denyMinRisk {
	case "LOW", "MEDIUM", "HIGH", "CRITICAL":
	default:
		return fmt.Errorf("%w: deny_min_risk must be LOW, MEDIUM, HIGH or CRITICAL", ErrInvalidRequest)
	}
	return in.mutate(ctx, func(st *IncidentState) error {
		st.Mode = IncidentMode{Active: true, DenyMinRisk: denyMinRisk, EgressBlock: m.EgressBlock, Reason: reason, By: by, Since: in.o.Now().UTC()}
		return nil
	})
}

// Disable switches incident mode off. Kill rules, revocations and
// quarantines stay until removed one by one.
func (in *Incident) Disable(ctx context.Context) error {
	return in.mutate(ctx, func(st *IncidentState) error {
		st.Mode = IncidentMode{}
		return nil
	})
}

// AddKill puts a kill rule in force and returns it with its id (a new
// UUIDv7 unless given) and timestamp.
func (in *Incident) AddKill(ctx context.Context, k KillRule) (KillRule, error) {
	if k.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return KillRule{}, fmt.Errorf("incident: %w", err)
		}
		k.ID = id.String()
	}
	k.At = in.o.Now().UTC()
	if _, err := compileKill(k); err != nil {
		return KillRule{}, err
	}
	err := in.mutate(ctx, func(st *IncidentState) error {
		for _, x := range st.Kill {
			if x.ID == k.ID {
				return fmt.Errorf("%w: kill rule %q exists", ErrInvalidRequest, k.ID)
			}
		}
		st.Kill = append(st.Kill, k)
		return nil
	})
	return k, err
}

// RemoveKill lifts the kill rule id.
func (in *Incident) RemoveKill(ctx context.Context, id string) error {
	return in.mutate(ctx, func(st *IncidentState) error {
		i := slices.IndexFunc(st.Kill, func(k KillRule) bool { return k.ID == id })
		if i < 0 {
			return fmt.Errorf("%w: kill rule %q", ErrNotFound, id)
		}
		st.Kill = slices.Delete(st.Kill, i, i+1)
		return nil
	})
}

// revocations names the three revocation maps.
type revocations int

const (
	revPrincipal revocations = iota
	revToken
	revSession
	revQuarantined
)

func (r revocations) of(st *IncidentState) map[string]Revocation {
	switch r {
	case revPrincipal:
		return st.Principals
	case revToken:
		return st.Tokens
	case revQuarantined:
		return st.Quarantined
	}
	return st.Sessions
}

func (in *Incident) revoke(ctx context.Context, which revocations, id, by, reason string, until time.Time) error {
	if id == "" {
		return fmt.Errorf("%w: an id is required", ErrInvalidRequest)
	}
	now := in.o.Now().UTC()
	if !until.IsZero() && !until.After(now) {
		return fmt.Errorf("%w: until is in the past", ErrInvalidRequest)
	}
	err := in.mutate(ctx, func(st *IncidentState) error {
		which.of(st)[id] = Revocation{Reason: reason, By: by, At: now, Until: until.UTC()}
		return nil
	})
	if err == nil && in.o.OnRevoke != nil {
		switch which {
		case revPrincipal, revQuarantined:
			in.o.OnRevoke(ctx, RevokedPrincipal, id)
		case revToken:
			in.o.OnRevoke(ctx, RevokedToken, id)
		}
	}
	return err
}

func (in *Incident) restore(ctx context.Context, which revocations, id string) error {
	return in.mutate(ctx, func(st *IncidentState) error {
		m := which.of(st)
		if _, ok := m[id]; !ok {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		delete(m, id)
		return nil
	})
}

// RevokePrincipal cuts off a principal, named by subject (every issuer)
// or by principal key (one issuer), until the given time (zero: until
// restored).
func (in *Incident) RevokePrincipal(ctx context.Context, subOrKey, by, reason string, until time.Time) error {
	return in.revoke(ctx, revPrincipal, subOrKey, by, reason, until)
}

// RestorePrincipal lifts a principal's revocation.
func (in *Incident) RestorePrincipal(ctx context.Context, subOrKey string) error {
	return in.restore(ctx, revPrincipal, subOrKey)
}

// RevokeToken cuts off one token by its jti.
func (in *Incident) RevokeToken(ctx context.Context, jti, by, reason string, until time.Time) error {
	return in.revoke(ctx, revToken, jti, by, reason, until)
}

// RestoreToken lifts a token's revocation.
func (in *Incident) RestoreToken(ctx context.Context, jti string) error {
	return in.restore(ctx, revToken, jti)
}

// Quarantine cuts off one MCP session.
func (in *Incident) Quarantine(ctx context.Context, sessionID, by, reason string, until time.Time) error {
	return in.revoke(ctx, revSession, sessionID, by, reason, until)
}

// Release lifts the quarantine of a session, or of a principal (by
// principal key): whichever id names.
func (in *Incident) Release(ctx context.Context, id string) error {
	return in.mutate(ctx, func(st *IncidentState) error {
		_, s := st.Sessions[id]
		_, p := st.Quarantined[id]
		if !s && !p {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		delete(st.Sessions, id)
		delete(st.Quarantined, id)
		return nil
	})
}

// QuarantinePrincipal cuts off a principal by its key until the given
// time (zero: until released).
func (in *Incident) QuarantinePrincipal(ctx context.Context, key, by, reason string, until time.Time) error {
	return in.revoke(ctx, revQuarantined, key, by, reason, until)
}

// quarantineKeyPrefix prefixes the KV windows that count a principal's
// denials.
const quarantineKeyPrefix = "quarantine/"

// Denied counts one denial of the principal key against the
// auto-quarantine threshold (QuarantineDenials within QuarantineWindow,
// counted on the KV, so across every replica sharing it) and quarantines
// the principal when it reaches it; it reports whether this denial did.
// Denials the incident state itself made (a quarantine, a revocation, the
// kill switch, incident mode) are for the caller to leave out.
func (in *Incident) Denied(ctx context.Context, key string) (bool, error) {
	n := in.o.QuarantineDenials
	if n <= 0 || key == "" {
		return false, nil
	}
	if n > 1 {
		res, err := in.o.KV.Admit(ctx, state.AdmitRequest{Keys: []string{quarantineKeyPrefix + key}, Limits: []int{n - 1},
			Window: in.o.QuarantineWindow, Now: in.o.Now(), Take: true})
		if err != nil {
			return false, fmt.Errorf("incident: %w", err)
		}
		if res.Denied < 0 {
			return false, nil
		}
	}
	reason := fmt.Sprintf("auto-quarantine: %d denials within %s", n, in.o.QuarantineWindow)
	if err := in.QuarantinePrincipal(ctx, key, "quiver", reason, time.Time{}); err != nil {
		return false, err
	}
	return true, nil
}

// EgressBlocked reports whether incident mode blocks egress: the
// sandboxes' egress proxies then refuse every destination. When the state
// cannot be read it reports true (fail closed).
func (in *Incident) EgressBlocked(ctx context.Context) bool {
	s, err := in.snapshot(ctx)
	if err != nil {
		return true
	}
	return s.state.Mode.Active && s.state.Mode.EgressBlock
}
