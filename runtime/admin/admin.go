// Package admin is quiver's operator API for incident response and
// approvals (spec 001 MUST 9): an http.Handler under /admin/v1/ that turns
// incident mode on and off, adds and lifts kill rules, revokes principals
// and tokens, quarantines sessions, and grants or denies approvals. Every
// change is in force for the very next request (see policy.Incident).
//
// Every request must authenticate, with the admin bearer token or with a
// JWT (identity.Verifier) whose principal carries the admin claim;
// anything else gets 401 (no or bad credentials) or 403 (a valid caller
// who is not an administrator).
//
//	GET    /admin/v1/incident                       state (mode, kill rules, revocations, quarantines)
//	POST   /admin/v1/incident                       {"reason", "deny_min_risk"}: incident mode on
//	DELETE /admin/v1/incident                       incident mode off
//	POST   /admin/v1/kill                           {"id"?, "all"?, "min_risk"?, "tool_class"?, "server"?, "namespace"?, "tool_id"?, "reason"?}
//	DELETE /admin/v1/kill/{id}
//	POST   /admin/v1/revocations/principals         {"sub", "reason"?, "until"?}  (sub or principal key)
//	DELETE /admin/v1/revocations/principals/{sub}
//	POST   /admin/v1/revocations/tokens             {"jti", "reason"?, "until"?}
//	DELETE /admin/v1/revocations/tokens/{jti}
//	POST   /admin/v1/quarantine                     {"session_id", "reason"?, "until"?}
//	DELETE /admin/v1/quarantine/{session_id}
//	GET    /admin/v1/approvals                      pending approvals
//	GET    /admin/v1/approvals/{id}
//	POST   /admin/v1/approvals/{id}/grant
//	POST   /admin/v1/approvals/{id}/deny
//	GET    /admin/v1/capabilities                   live capability tokens (capabilities.go)
//	GET    /admin/v1/capabilities/revocations
//	POST   /admin/v1/capabilities/revocations       {"jti" | "holder" | "kid", "reason"?}
//
// Answers are JSON; errors are {"error": code, "message": one line}.
//
// NewConsole serves the same operations to a browser under /ui/ (the
// operator console): the same credentials, entered once for a session
// cookie, the same stores and the same receipts.
package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// Prefix is the path prefix of the admin API.
const Prefix = "/admin/v1/"

// MinTokenBytes is the shortest accepted admin token.
const MinTokenBytes = 32

// maxBody caps a request body.
const maxBody = 64 << 10

// TokenOperator is the operator name of requests authenticated with the
// admin token.
const TokenOperator = "admin-token"

// ErrConfig is matched by the errors of New.
var ErrConfig = errors.New("invalid admin API configuration")

// Claim is the claim that makes a JWT principal an administrator: the
// claim Name equals Value, or is an array holding Value, or is the
// boolean true when Value is "true".
type Claim struct {
	Name  string `json:"name" yaml:"name"`
	Value string `json:"value" yaml:"value"`
}

// holds reports whether p carries the claim.
func (c Claim) holds(p identity.Principal) bool {
	if c.Name == "" {
		return false
	}
	switch v := p.Claims[c.Name].(type) {
	case string:
		return v == c.Value
	case bool:
		return v && c.Value == "true"
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && s == c.Value {
				return true
			}
		}
	case []string:
		for _, s := range v {
			if s == c.Value {
				return true
			}
		}
	}
	return false
}

// Action is one authenticated admin request, reported to OnAction (the
// runtime writes a receipt for it).
type Action struct {
	// Operator is who asked: TokenOperator, or the principal's key.
	Operator string
	// Principal is the JWT principal (zero for the admin token).
	Principal identity.Principal
	// Method names the operation, e.g. "admin/kill.add".
	Method string
	// Target is the id the operation concerns (kill rule, sub, jti,
	// session, approval).
	Target string
	// Status is the HTTP status answered; Err the error code, if any.
	Status int
	Err    string
	// Comment is the operator's note on the action (the console's
	// approval and incident forms), "" when none.
	Comment string
}

// Options configure the handler. Incident is required; at least one of
// Token and Verifier (with AdminClaim) must be set.
type Options struct {
	Incident  *policy.Incident
	Approvals *policy.Approvals
	// Capabilities, when set, serves the capability endpoints
	// (capabilities.go).
	Capabilities *capability.Store
	// ToolRequests, when set, lists restricted principals' requests.
	ToolRequests *capability.Requests
	// Token is the admin bearer token (at least 32 bytes), typically read
	// from an environment variable named in the configuration.
	Token []byte
	// Verifier authenticates JWTs; a principal is an administrator when it
	// holds AdminClaim.
	Verifier   *identity.Verifier
	AdminClaim Claim
	// OnAction, when set, is called after every authenticated request,
	// read-only ones included.
	OnAction func(r *http.Request, a Action)
	// OnDeny, when set, is called for every refused authentication with
	// a reason (an identity Reason* code, "not_admin" or
	// "bad_admin_token").
	OnDeny func(r *http.Request, reason string)
	// Now is the clock for approval decisions (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

type handler struct {
	o     Options
	log   *slog.Logger
	token [32]byte // sha256 of the admin token
	mux   *http.ServeMux
}

// New validates o and returns the admin API handler. Mount it at Prefix
// (it answers 404 elsewhere), on a listener of its own or beside the MCP
// endpoint; it must not sit behind the MCP authentication middleware,
// since it authenticates on its own.
func New(o Options) (http.Handler, error) {
	if o.Incident == nil {
		return nil, fmt.Errorf("%w: an incident store is required", ErrConfig)
	}
	if len(o.Token) == 0 && o.Verifier == nil {
		return nil, fmt.Errorf("%w: an admin token or a verifier with an admin claim is required", ErrConfig)
	}
	if len(o.Token) > 0 && len(o.Token) < MinTokenBytes {
		return nil, fmt.Errorf("%w: the admin token is shorter than %d bytes", ErrConfig, MinTokenBytes)
	}
	if o.Verifier != nil && o.AdminClaim.Name == "" {
		return nil, fmt.Errorf("%w: a verifier needs an admin claim", ErrConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &handler{o: o, log: o.Logger, mux: http.NewServeMux()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if len(o.Token) > 0 {
		h.token = sha256.Sum256(o.Token)
	}
	h.routes()
	return h, nil
}

// caller is an authenticated administrator.
type caller struct {
	operator  string
	principal identity.Principal
}

type callerKey struct{}

// contextWith returns r's context carrying c.
func contextWith(r *http.Request, c caller) context.Context {
	return context.WithValue(r.Context(), callerKey{}, c)
}

// ServeHTTP authenticates, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	c, status, reason := h.authenticate(r)
	if status != 0 {
		if h.o.OnDeny != nil {
			h.o.OnDeny(r, reason)
		}
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quiver-admin", error="invalid_token"`)
			writeError(w, status, "unauthorized", "an admin bearer token or an administrator's JWT is required")
			return
		}
		writeError(w, status, "forbidden", "the caller is not an administrator")
		return
	}
	rec := &recorder{ResponseWriter: w}
	h.mux.ServeHTTP(rec, r.WithContext(contextWith(r, c)))
	if h.o.OnAction != nil && rec.method != "" {
		h.o.OnAction(r, Action{Operator: c.operator, Principal: c.principal, Method: rec.method, Target: rec.target,
			Status: rec.status, Err: rec.errCode})
	}
}

// authenticate returns the caller, or a status (401/403) and a reason.
func (h *handler) authenticate(r *http.Request) (caller, int, string) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return caller{}, http.StatusUnauthorized, identity.ReasonMissingToken
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	token = strings.TrimLeft(token, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return caller{}, http.StatusUnauthorized, identity.ReasonMalformedHeader
	}
	return h.authenticateToken(r.Context(), token)
}

// authenticateToken checks a bearer credential: the admin token, or a JWT
// of a principal holding the admin claim.
func (h *handler) authenticateToken(ctx context.Context, token string) (caller, int, string) {
	if len(h.o.Token) > 0 {
		sum := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(sum[:], h.token[:]) == 1 {
			return caller{operator: TokenOperator}, 0, ""
		}
	}
	if h.o.Verifier == nil {
		return caller{}, http.StatusUnauthorized, "bad_admin_token"
	}
	p, err := h.o.Verifier.Verify(ctx, token)
	if err != nil {
		return caller{}, http.StatusUnauthorized, identity.Reason(err)
	}
	if !h.o.AdminClaim.holds(p) {
		return caller{}, http.StatusForbidden, "not_admin"
	}
	return caller{operator: p.Key(), principal: p}, 0, ""
}

// recorder remembers the status and the operation for OnAction.
type recorder struct {
	http.ResponseWriter
	status          int
	method, target  string
	errCode         string
	wroteHeaderOnce bool
}

// WriteHeader records the first status written.
func (rw *recorder) WriteHeader(code int) {
	if !rw.wroteHeaderOnce {
		rw.status, rw.wroteHeaderOnce = code, true
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (h *handler) routes() {
	m := h.mux
	m.HandleFunc("GET /admin/v1/incident", h.op("admin/incident.get", h.getIncident))
	m.HandleFunc("POST /admin/v1/incident", h.op("admin/incident.enable", h.enable))
	m.HandleFunc("DELETE /admin/v1/incident", h.op("admin/incident.disable", h.disable))
	m.HandleFunc("POST /admin/v1/kill", h.op("admin/kill.add", h.addKill))
	m.HandleFunc("DELETE /admin/v1/kill/{id}", h.op("admin/kill.remove", h.removeKill))
	m.HandleFunc("POST /admin/v1/revocations/principals", h.op("admin/principal.revoke", h.revoke("sub", h.o.Incident.RevokePrincipal)))
	m.HandleFunc("DELETE /admin/v1/revocations/principals/{id}", h.op("admin/principal.restore", h.restore(h.o.Incident.RestorePrincipal)))
	m.HandleFunc("POST /admin/v1/revocations/tokens", h.op("admin/token.revoke", h.revoke("jti", h.o.Incident.RevokeToken)))
	m.HandleFunc("DELETE /admin/v1/revocations/tokens/{id}", h.op("admin/token.restore", h.restore(h.o.Incident.RestoreToken)))
	m.HandleFunc("POST /admin/v1/quarantine", h.op("admin/session.quarantine", h.revoke("session_id", h.o.Incident.Quarantine)))
	m.HandleFunc("DELETE /admin/v1/quarantine/{id}", h.op("admin/session.release", h.restore(h.o.Incident.Release)))
	m.HandleFunc("GET /admin/v1/approvals", h.op("admin/approvals.list", h.listApprovals))
	m.HandleFunc("GET /admin/v1/approvals/{id}", h.op("admin/approval.get", h.getApproval))
	m.HandleFunc("POST /admin/v1/approvals/{id}/grant", h.op("admin/approval.grant", h.decide(true)))
	m.HandleFunc("POST /admin/v1/approvals/{id}/deny", h.op("admin/approval.deny", h.decide(false)))
	h.capabilityRoutes()
	m.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such admin endpoint")
	})
}

// opFunc handles one operation and returns the target it concerned, the
// answer, and an error (an *apiError or an internal one).
type opFunc func(r *http.Request, c caller) (target string, status int, body any, err error)

// op wraps an operation: it runs it, writes the answer, and records the
// operation for OnAction.
func (h *handler) op(method string, fn opFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(callerKey{}).(caller)
		target, status, body, err := fn(r, c)
		if rec, ok := w.(*recorder); ok {
			rec.method, rec.target = method, target
		}
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				h.log.Error("admin operation failed", "method", method, "err", err)
				ae = &apiError{status: http.StatusInternalServerError, code: "internal", msg: "the operation failed"}
			}
			if rec, ok := w.(*recorder); ok {
				rec.errCode = ae.code
			}
			writeError(w, ae.status, ae.code, ae.msg)
			return
		}
		h.log.Info("admin operation", "method", method, "target", target, "operator", c.operator)
		writeJSON(w, status, body)
	}
}

// apiError is an error answered to the client as is.
type apiError struct {
	status    int
	code, msg string
}

// Error implements error.
func (e *apiError) Error() string { return e.code + ": " + e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", msg: oneLine(fmt.Sprintf(format, args...))}
}

// classify maps store errors to API errors. A change applied in memory
// but not persisted is not an error: it is in force (see okPersist).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, policy.ErrInvalidRequest):
		return badRequest("%v", err)
	case errors.Is(err, policy.ErrNotFound), errors.Is(err, policy.ErrApprovalNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", msg: oneLine(err.Error())}
	case errors.Is(err, policy.ErrApprovalDecided), errors.Is(err, policy.ErrApprovalExpired):
		return &apiError{status: http.StatusConflict, code: "conflict", msg: oneLine(err.Error())}
	case errors.Is(err, state.ErrUnavailable), errors.Is(err, policy.ErrIncidentState):
		return errUnavailable()
	}
	return err
}

// errUnavailable is the answer when the shared state cannot be read or
// written: nothing was changed, and the operator may retry.
func errUnavailable() error {
	return &apiError{status: http.StatusServiceUnavailable, code: "state_unavailable", msg: "the state backend is unavailable; nothing was changed"}
}

// result is the answer of a change: what is now in force.
type result struct {
	OK    bool `json:"ok"`
	Value any  `json:"value,omitempty"`
}

// okPersist turns a store error into a result: a change that returned no
// error is stored, and in force in every process sharing the state.
func okPersist(err error, v any) (result, error) {
	if err != nil {
		return result{}, classify(err)
	}
	return result{OK: true, Value: v}, nil
}

// decode reads a JSON body strictly into v; an empty body is {}.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("cannot read the body")
	}
	if len(data) > maxBody {
		return badRequest("the body is larger than %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("bad JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("unexpected data after the JSON body")
	}
	return nil
}

func (h *handler) getIncident(r *http.Request, _ caller) (string, int, any, error) {
	st, err := h.o.Incident.State(r.Context())
	if err != nil {
		return "", 0, nil, classify(err)
	}
	return "", http.StatusOK, struct {
		Active bool `json:"active"`
		policy.IncidentState
	}{st.Mode.Active || len(st.Kill) > 0, st}, nil
}

func (h *handler) enable(r *http.Request, c caller) (string, int, any, error) {
	var body struct {
		Reason      string `json:"reason"`
		DenyMinRisk string `json:"deny_min_risk"`
		EgressBlock bool   `json:"egress_block"`
	}
	if err := decode(r, &body); err != nil {
		return "", 0, nil, err
	}
	m := policy.IncidentMode{By: c.operator, Reason: body.Reason, DenyMinRisk: body.DenyMinRisk, EgressBlock: body.EgressBlock}
	if err := h.o.Incident.EnableMode(r.Context(), m); err != nil {
		return "", 0, nil, classify(err)
	}
	st, err := h.o.Incident.State(r.Context())
	res, err := okPersist(err, st.Mode)
	return "", http.StatusOK, res, err
}

func (h *handler) disable(r *http.Request, _ caller) (string, int, any, error) {
	res, err := okPersist(h.o.Incident.Disable(r.Context()), nil)
	return "", http.StatusOK, res, err
}

func (h *handler) addKill(r *http.Request, c caller) (string, int, any, error) {
	var k policy.KillRule
	if err := decode(r, &k); err != nil {
		return "", 0, nil, err
	}
	if !k.At.IsZero() || k.By != "" {
		return "", 0, nil, badRequest("by and at are set by the server")
	}
	k.By = c.operator
	added, err := h.o.Incident.AddKill(r.Context(), k)
	res, err := okPersist(err, added)
	return added.ID, http.StatusCreated, res, err
}

func (h *handler) removeKill(r *http.Request, _ caller) (string, int, any, error) {
	id := r.PathValue("id")
	res, err := okPersist(h.o.Incident.RemoveKill(r.Context(), id), nil)
	return id, http.StatusOK, res, err
}

// revoke handles a POST that revokes by the body field idField.
func (h *handler) revoke(idField string, fn func(ctx context.Context, id, by, reason string, until time.Time) error) opFunc {
	return func(r *http.Request, c caller) (string, int, any, error) {
		var body map[string]json.RawMessage
		if err := decode(r, &body); err != nil {
			return "", 0, nil, err
		}
		var id, reason string
		var until time.Time
		for k, v := range body {
			var err error
			switch k {
			case idField:
				err = json.Unmarshal(v, &id)
			case "reason":
				err = json.Unmarshal(v, &reason)
			case "until":
				err = json.Unmarshal(v, &until)
			default:
				return "", 0, nil, badRequest("unknown field %q (allowed: %s, reason, until)", k, idField)
			}
			if err != nil {
				return "", 0, nil, badRequest("field %q: %v", k, err)
			}
		}
		if id == "" {
			return "", 0, nil, badRequest("%s is required", idField)
		}
		res, err := okPersist(fn(r.Context(), id, c.operator, reason, until), nil)
		return id, http.StatusOK, res, err
	}
}

func (h *handler) restore(fn func(ctx context.Context, id string) error) opFunc {
	return func(r *http.Request, _ caller) (string, int, any, error) {
		id := r.PathValue("id")
		res, err := okPersist(fn(r.Context(), id), nil)
		return id, http.StatusOK, res, err
	}
}

func errNoApprovals() error {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: "approvals are not enabled"}
}

func (h *handler) listApprovals(r *http.Request, _ caller) (string, int, any, error) {
	if h.o.Approvals == nil {
		return "", 0, nil, errNoApprovals()
	}
	pending, err := h.o.Approvals.Pending(r.Context())
	if err != nil {
		return "", 0, nil, classify(err)
	}
	if pending == nil {
		pending = []policy.Approval{}
	}
	return "", http.StatusOK, map[string]any{"pending": pending}, nil
}

func (h *handler) getApproval(r *http.Request, _ caller) (string, int, any, error) {
	if h.o.Approvals == nil {
		return "", 0, nil, errNoApprovals()
	}
	id := r.PathValue("id")
	a, ok, err := h.o.Approvals.Get(r.Context(), id)
	if err != nil {
		return id, 0, nil, classify(err)
	}
	if !ok {
		return id, 0, nil, &apiError{status: http.StatusNotFound, code: "not_found", msg: "no such approval"}
	}
	return id, http.StatusOK, a, nil
}

func (h *handler) decide(grant bool) opFunc {
	return func(r *http.Request, c caller) (string, int, any, error) {
		if h.o.Approvals == nil {
			return "", 0, nil, errNoApprovals()
		}
		id := r.PathValue("id")
		if err := decode(r, &struct{}{}); err != nil {
			return id, 0, nil, err
		}
		fn := h.o.Approvals.Deny
		if grant {
			fn = h.o.Approvals.Grant
		}
		a, err := fn(r.Context(), id, c.operator, h.o.Now())
		res, err := okPersist(err, a)
		return id, http.StatusOK, res, err
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "encoding the answer failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	data, _ := json.Marshal(map[string]string{"error": code, "message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// oneLine keeps a message to one printable line of at most 256 bytes.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		cut := 256
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.TrimSpace(s)
}
