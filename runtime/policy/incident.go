package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// incidentFile is the state file in an incident store's directory.
const incidentFile = "incident.json"

// Reason codes of incident denials.
const (
	ReasonSessionQuarantined = "SESSION_QUARANTINED"
	ReasonPrincipalRevoked   = "PRINCIPAL_REVOKED"
	ReasonTokenRevoked       = "TOKEN_REVOKED"
	ReasonIncidentMode       = "INCIDENT_MODE"
	ReasonKillSwitch         = "KILL_SWITCH"
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
	Active      bool      `json:"active"`
	DenyMinRisk string    `json:"deny_min_risk,omitempty"`
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

// IncidentState is the whole incident state, as persisted in
// incident.json.
type IncidentState struct {
	Mode IncidentMode `json:"mode"`
	Kill []KillRule   `json:"kill"`
	// Principals are revoked by subject or by principal key
	// (identity.Principal.Key).
	Principals map[string]Revocation `json:"revoked_principals"`
	// Tokens are revoked by jti.
	Tokens map[string]Revocation `json:"revoked_tokens"`
	// Sessions are quarantined by MCP session id.
	Sessions map[string]Revocation `json:"quarantined_sessions"`
}

func (s IncidentState) clone() IncidentState {
	s.Kill = slices.Clone(s.Kill)
	s.Principals = maps.Clone(s.Principals)
	s.Tokens = maps.Clone(s.Tokens)
	s.Sessions = maps.Clone(s.Sessions)
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
	// Dir, when set, persists the state to Dir/incident.json so it
	// survives restarts; "" keeps it in memory.
	Dir string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Incident is the incident-mode state: the kill switch, revocations and
// quarantines. Checks read an immutable snapshot through one atomic load,
// so a change is in force for the very next check; changes are
// serialized, persisted, then published. It is safe for concurrent use
// and holds no goroutine.
type Incident struct {
	o    IncidentOptions
	path string
	mu   sync.Mutex // serializes changes
	cur  atomic.Pointer[incidentSnapshot]
}

type incidentSnapshot struct {
	state IncidentState
	kill  []compiledKill
}

type compiledKill struct {
	KillRule
	minRisk                   int // -1: none
	class                     map[string]bool
	server, namespace, toolID globSet
}

// OpenIncident opens the store and loads the persisted state. An
// unreadable state file is an error (ErrIncidentState): starting with the
// kill switch silently off would be worse than not starting.
func OpenIncident(o IncidentOptions) (*Incident, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	in := &Incident{o: o}
	st := IncidentState{}.clone()
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("incident: %w", err)
		}
		in.path = filepath.Join(o.Dir, incidentFile)
		data, err := os.ReadFile(in.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("%w: %w", ErrIncidentState, err)
		default:
			if err := json.Unmarshal(data, &st); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrIncidentState, in.path, err)
			}
			st = st.clone()
		}
	}
	snap, err := compileIncident(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncidentState, err)
	}
	in.cur.Store(snap)
	return in, nil
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
func (in *Incident) State() IncidentState { return in.cur.Load().state.clone() }

// Active reports whether incident mode is on: switched on with Enable, or
// with at least one kill rule in force. Receipts record it as
// incident_mode.
func (in *Incident) Active() bool {
	s := in.cur.Load()
	return s.state.Mode.Active || len(s.kill) > 0
}

// Evaluate checks req against the incident state: a quarantined session,
// a revoked principal (by subject or key) or token (by jti), incident
// mode's risk floor, then the kill rules in order. It does not look at the
// action, so it applies alike to list and call (what is denied is hidden
// too) and to an upstream's sample and elicit requests (matched by the
// upstream's server and the tool_id of the call in flight; a request
// without a risk counts as CRITICAL).
func (in *Incident) Evaluate(req Request) Denial {
	s := in.cur.Load()
	now := in.o.Now()
	st := &s.state
	if r, ok := st.Sessions[req.SessionID]; ok && req.SessionID != "" && r.activeAt(now) {
		return Denial{Denied: true, Code: ReasonSessionQuarantined}
	}
	if p := req.Principal; !p.IsZero() {
		if r, ok := st.Principals[p.Sub]; ok && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonPrincipalRevoked}
		}
		if r, ok := st.Principals[p.Key()]; ok && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonPrincipalRevoked}
		}
		if r, ok := st.Tokens[p.JTI]; ok && p.JTI != "" && r.activeAt(now) {
			return Denial{Denied: true, Code: ReasonTokenRevoked}
		}
	}
	if st.Mode.Active {
		floor := st.Mode.DenyMinRisk
		if floor == "" {
			floor = "HIGH"
		}
		if riskRank(req.Risk) >= riskRank(floor) {
			return Denial{Denied: true, Code: ReasonIncidentMode}
		}
	}
	for i := range s.kill {
		if s.kill[i].matches(&req) {
			return Denial{Denied: true, Code: ReasonKillSwitch, RuleID: s.kill[i].ID}
		}
	}
	return Denial{}
}

// Check is Evaluate as (denied, reason code).
func (in *Incident) Check(req Request) (bool, string) {
	d := in.Evaluate(req)
	return d.Denied, d.Code
}

// Revoked reports whether the token jti, or the principal named by sub (a
// subject or a principal key), is revoked; it fits
// identity.Options.Revoked, so that revoked tokens and principals fail
// authentication.
func (in *Incident) Revoked(jti, subOrKey string) bool {
	s := in.cur.Load()
	now := in.o.Now()
	if r, ok := s.state.Tokens[jti]; ok && jti != "" && r.activeAt(now) {
		return true
	}
	if r, ok := s.state.Principals[subOrKey]; ok && subOrKey != "" && r.activeAt(now) {
		return true
	}
	return false
}

// mutate applies fn to a copy of the state, drops lapsed revocations,
// persists the result and publishes it. When persisting fails the change
// is still published (a kill switch must take effect) and the error
// matches ErrNotPersisted.
func (in *Incident) mutate(fn func(*IncidentState) error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := in.cur.Load().state.clone()
	if err := fn(&st); err != nil {
		return err
	}
	now := in.o.Now()
	for _, m := range []map[string]Revocation{st.Principals, st.Tokens, st.Sessions} {
		maps.DeleteFunc(m, func(_ string, r Revocation) bool { return !r.activeAt(now) })
	}
	snap, err := compileIncident(st)
	if err != nil {
		return err
	}
	perr := in.persist(st)
	in.cur.Store(snap)
	return perr
}

// persist writes the state atomically: temp file, fsync, rename, fsync of
// the directory.
func (in *Incident) persist(st IncidentState) error {
	if in.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(in.path), ".incident-*.tmp")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	if err := os.Rename(tmp.Name(), in.path); err != nil {
		return fmt.Errorf("%w: %w", ErrNotPersisted, err)
	}
	syncDir(filepath.Dir(in.path))
	return nil
}

// Enable switches incident mode on: tools at or above denyMinRisk
// (default HIGH) are denied until Disable.
func (in *Incident) Enable(by, reason, denyMinRisk string) error {
	if denyMinRisk == "" {
		denyMinRisk = "HIGH"
	}
	switch denyMinRisk {
	case "LOW", "MEDIUM", "HIGH", "CRITICAL":
	default:
		return fmt.Errorf("%w: deny_min_risk must be LOW, MEDIUM, HIGH or CRITICAL", ErrInvalidRequest)
	}
	return in.mutate(func(st *IncidentState) error {
		st.Mode = IncidentMode{Active: true, DenyMinRisk: denyMinRisk, Reason: reason, By: by, Since: in.o.Now().UTC()}
		return nil
	})
}

// Disable switches incident mode off. Kill rules, revocations and
// quarantines stay until removed one by one.
func (in *Incident) Disable() error {
	return in.mutate(func(st *IncidentState) error {
		st.Mode = IncidentMode{}
		return nil
	})
}

// AddKill puts a kill rule in force and returns it with its id (a new
// UUIDv7 unless given) and timestamp.
func (in *Incident) AddKill(k KillRule) (KillRule, error) {
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
	err := in.mutate(func(st *IncidentState) error {
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
func (in *Incident) RemoveKill(id string) error {
	return in.mutate(func(st *IncidentState) error {
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
)

func (r revocations) of(st *IncidentState) map[string]Revocation {
	switch r {
	case revPrincipal:
		return st.Principals
	case revToken:
		return st.Tokens
	}
	return st.Sessions
}

func (in *Incident) revoke(which revocations, id, by, reason string, until time.Time) error {
	if id == "" {
		return fmt.Errorf("%w: an id is required", ErrInvalidRequest)
	}
	now := in.o.Now().UTC()
	if !until.IsZero() && !until.After(now) {
		return fmt.Errorf("%w: until is in the past", ErrInvalidRequest)
	}
	return in.mutate(func(st *IncidentState) error {
		which.of(st)[id] = Revocation{Reason: reason, By: by, At: now, Until: until.UTC()}
		return nil
	})
}

func (in *Incident) restore(which revocations, id string) error {
	return in.mutate(func(st *IncidentState) error {
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
func (in *Incident) RevokePrincipal(subOrKey, by, reason string, until time.Time) error {
	return in.revoke(revPrincipal, subOrKey, by, reason, until)
}

// RestorePrincipal lifts a principal's revocation.
func (in *Incident) RestorePrincipal(subOrKey string) error {
	return in.restore(revPrincipal, subOrKey)
}

// RevokeToken cuts off one token by its jti.
func (in *Incident) RevokeToken(jti, by, reason string, until time.Time) error {
	return in.revoke(revToken, jti, by, reason, until)
}

// RestoreToken lifts a token's revocation.
func (in *Incident) RestoreToken(jti string) error { return in.restore(revToken, jti) }

// Quarantine cuts off one MCP session.
func (in *Incident) Quarantine(sessionID, by, reason string, until time.Time) error {
	return in.revoke(revSession, sessionID, by, reason, until)
}

// Release lifts a session's quarantine.
func (in *Incident) Release(sessionID string) error { return in.restore(revSession, sessionID) }
