package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/runtime/callstats"
	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// The operator console: server-rendered pages under ConsolePrefix for the
// people who watch a fleet (issue 19). It is the admin API's twin for a
// browser: the same credentials (entered once, then a session cookie), the
// same stores, the same receipts for every action, and the same Host and
// Origin checks in front of it (the runtime mounts it behind them). Pages
// read without JavaScript; console.js only adds the live receipt tail and
// small conveniences.

// ConsolePrefix is the path prefix of the console.
const ConsolePrefix = "/ui/"

// DefaultConsoleSessionTTL is how long a console login lasts.
const DefaultConsoleSessionTTL = 8 * time.Hour

// Login throttling: failed and successful logins alike count against a
// window per client address, so a token cannot be guessed at line rate.
const (
	loginWindow = time.Minute
	loginLimit  = 10
)

// Console page sizes.
const (
	receiptsPageSize = 50
	catalogTopK      = 20
)

// RecentWindow is the span of the fleet page's call figures
// (Upstream.Recent).
const RecentWindow = 5 * time.Minute

// sessionCookie is the console's session cookie. The __Host- prefix is
// used over TLS (it requires Secure and Path=/), a plain name otherwise.
const (
	sessionCookie       = "quiver_console"
	sessionCookieSecure = "__Host-quiver_console"
)

//go:embed ui
var uiFiles embed.FS

// Fleet is what the console shows of the running gateway; the runtime
// implements it.
type Fleet interface {
	// Upstreams lists the configured upstreams in configuration order.
	Upstreams(ctx context.Context) []Upstream
	// Browse answers as tool_browse answers the principal as (the zero
	// principal browses as an anonymous caller).
	Browse(ctx context.Context, as identity.Principal, q BrowseQuery) (BrowsePage, error)
	// Tool is the detail of one tool as the principal as sees it; false
	// when there is no such tool (or as may not see it).
	Tool(ctx context.Context, as identity.Principal, id string) (ToolDetail, bool)
}

// Upstream is one upstream's line on the fleet page.
type Upstream struct {
	Name string
	// Status is starting, ready, degraded, down, failed or closed; Reason
	// says why it is not ready.
	Status, Reason string
	Since          time.Time
	// Protocol is the negotiated MCP revision.
	Protocol string
	// Transport is stdio, http, sse, catalog or cli.
	Transport string
	// Sandbox describes the isolation of a local upstream ("" for remote
	// ones).
	Sandbox     string
	Trust, Risk string
	// Tools, Resources and Prompts count the upstream's catalog items.
	Tools, Resources, Prompts int
	// Recent summarises its calls of the last minutes.
	Recent callstats.Stats
}

// BrowseQuery is a catalog browse: a query or a path.
type BrowseQuery struct {
	Query, Path, Cursor string
	TopK                int
}

// BrowsePage is a browse answer.
type BrowsePage struct {
	Cards      []choicecard.Card
	NextCursor string
	Total      int
}

// ToolDetail is one tool as the console's catalog page opens it.
type ToolDetail struct {
	ID, Server, UpstreamName, Description string
	// InputSchema and OutputSchema are indented JSON ("" when none).
	InputSchema, OutputSchema string
	// Class is the registry classification; RegistryVersion the
	// registry's version ("" without a registry).
	Class, RegistryVersion string
	Trust, Risk            string
	// Decisions are the policy's answers for listing and calling the tool
	// as the chosen principal.
	Decisions []Decision
}

// Decision is the policy's answer for one action.
type Decision struct {
	Action, Effect, PolicyID, RuleID string
	Reasons                          []string
}

// ConsoleOptions configure the console.
type ConsoleOptions struct {
	// Options are the admin API's: stores, credentials, hooks.
	Options
	// KV holds console sessions and login throttling; processes sharing
	// it share logins. Required.
	KV state.KV
	// Fleet is the gateway the pages show. Required.
	Fleet Fleet
	// Receipts reads the receipts files ("" Dir: none are written).
	Receipts receipts.Reader
	// SessionTTL is how long a login lasts (default
	// DefaultConsoleSessionTTL).
	SessionTTL time.Duration
	// Poll is how often the live tail looks for new receipts (default
	// 500 ms).
	Poll time.Duration
}

type console struct {
	o     ConsoleOptions
	api   *handler
	pages map[string]*template.Template
	mux   *http.ServeMux
	// streams holds a token per open live tail.
	streams chan struct{}
}

// NewConsole returns the console handler; mount it at ConsolePrefix behind
// the same Host and Origin checks as the admin API.
func NewConsole(o ConsoleOptions) (http.Handler, error) {
	if o.KV == nil || o.Fleet == nil {
		return nil, fmt.Errorf("%w: the console needs a state store and the fleet", ErrConfig)
	}
	api, err := New(o.Options)
	if err != nil {
		return nil, err
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultConsoleSessionTTL
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	c := &console{o: o, api: api.(*handler), mux: http.NewServeMux(), streams: make(chan struct{}, maxStreams)}
	if c.o.Now == nil {
		c.o.Now = time.Now
	}
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *console) routes() {
	m := c.mux
	static, _ := fs.Sub(uiFiles, "ui/static")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("POST /ui/logout", c.authed(c.logout))
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/fleet", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/fleet", c.authed(c.fleet))
	m.HandleFunc("GET /ui/catalog", c.authed(c.catalog))
	m.HandleFunc("GET /ui/tool", c.authed(c.tool))
	m.HandleFunc("GET /ui/receipts", c.authed(c.receipts))
	m.HandleFunc("GET /ui/receipts/stream", c.authed(c.stream))
	m.HandleFunc("GET /ui/receipt", c.authed(c.receipt))
	m.HandleFunc("GET /ui/approvals", c.authed(c.approvals))
	m.HandleFunc("POST /ui/approvals/{id}/{verdict}", c.authed(c.action("approvals", "approval.{verdict}", c.decide)))
	m.HandleFunc("GET /ui/incident", c.authed(c.incident))
	m.HandleFunc("POST /ui/incident/{verb}", c.authed(c.action("incident", "incident.{verb}", c.incidentMode)))
	m.HandleFunc("POST /ui/kill", c.authed(c.action("incident", "kill.add", c.addKill)))
	m.HandleFunc("POST /ui/kill/{id}/remove", c.authed(c.action("incident", "kill.remove", c.removeKill)))
	m.HandleFunc("POST /ui/revocations/{kind}", c.authed(c.action("incident", "{kind}.revoke", c.revoke)))
	m.HandleFunc("POST /ui/revocations/{kind}/{id}/restore", c.authed(c.action("incident", "{kind}.restore", c.restore)))
	m.HandleFunc("POST /ui/capabilities/revoke", c.authed(c.action("incident", "capability.revoke", c.revokeCapability)))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "no such page")
	})
}

// ServeHTTP sets the headers every console answer carries, then routes.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.mux.ServeHTTP(w, r)
}

// session is one console login, stored in the KV under the hash of its id
// (a leaked store does not leak usable cookies).
type session struct {
	Operator string `json:"operator"`
	// Sub and JTI name a JWT login's principal and token, re-checked
	// against the revocations on every request.
	Sub       string             `json:"sub,omitempty"`
	JTI       string             `json:"jti,omitempty"`
	Principal identity.Principal `json:"principal,omitzero"`
	CSRF      string             `json:"csrf"`
	Expires   time.Time          `json:"expires"`
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "console/session/" + hex.EncodeToString(sum[:])
}

func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func (c *console) cookieName(r *http.Request) string {
	if r.TLS != nil {
		return sessionCookieSecure
	}
	return sessionCookie
}

type sessionCtxKey struct{}

// authed lets a request through with a live session, and checks the CSRF
// token of every state change; a page request without a session goes to
// the login page.
func (c *console) authed(next func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.sessionOf(r)
		if err != nil {
			if errors.Is(err, state.ErrUnavailable) {
				c.fail(w, r, nil, http.StatusServiceUnavailable, "the state backend is unavailable; try again")
				return
			}
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/stream") {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, nil, http.StatusUnauthorized, "log in first")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				c.fail(w, r, s, http.StatusForbidden, "cross-site request refused")
				return
			}
			if err := r.ParseForm(); err != nil {
				c.fail(w, r, s, http.StatusBadRequest, "bad form")
				return
			}
			got := r.PostFormValue("csrf")
			if got == "" {
				got = r.Header.Get("X-CSRF-Token")
			}
			if !hmac.Equal([]byte(got), []byte(s.CSRF)) {
				c.fail(w, r, s, http.StatusForbidden, "the form's CSRF token is missing or stale; reload the page")
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionCtxKey{}, s)), s)
	}
}

// sameOrigin refuses what a browser marks as cross-site, and an Origin
// whose host is not the request's own (the host guard in front checked
// the host itself).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
	}
	return true
}

var errNoSession = errors.New("no console session")

func (c *console) sessionOf(r *http.Request) (*session, error) {
	ck, err := r.Cookie(c.cookieName(r))
	if err != nil || len(ck.Value) > 128 {
		return nil, errNoSession
	}
	data, err := c.o.KV.Get(r.Context(), sessionKey(ck.Value))
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil, errNoSession
		}
		return nil, err
	}
	var s session
	if err := json.Unmarshal(data, &s); err != nil || !c.o.Now().Before(s.Expires) {
		return nil, errNoSession
	}
	if s.Sub != "" || s.JTI != "" {
		// A JWT operator revoked since the login is logged out at once.
		revoked, err := c.o.Incident.Revoked(r.Context(), s.JTI, s.Sub)
		if err != nil {
			return nil, err
		}
		if revoked {
			return nil, errNoSession
		}
	}
	return &s, nil
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", nil, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a post-login redirect on the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, ConsolePrefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/fleet"
	}
	return next
}

func (c *console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "cross-site request refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, "bad form")
		return
	}
	res, err := c.o.KV.Admit(r.Context(), state.AdmitRequest{Keys: []string{"console/login/" + clientIP(r)},
		Limits: []int{loginLimit}, Window: loginWindow, Now: c.o.Now(), Take: true})
	if err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "the state backend is unavailable; try again")
		return
	}
	if res.Denied >= 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(res.RetryAfter.Seconds())+1))
		c.fail(w, r, nil, http.StatusTooManyRequests, "too many logins from this address; wait a minute")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	who, status, reason := c.api.authenticateToken(r.Context(), token)
	if token == "" {
		status, reason = http.StatusUnauthorized, identity.ReasonMissingToken
	}
	if status != 0 {
		if c.o.OnDeny != nil {
			c.o.OnDeny(r, reason)
		}
		msg := "that is not an admin token or an administrator's JWT"
		if status == http.StatusForbidden {
			msg = "that principal is not an administrator"
		}
		c.render(w, r, status, "login", nil, map[string]any{"Next": next, "Error": msg})
		return
	}
	id, err1 := randomToken()
	csrf, err2 := randomToken()
	if err := errors.Join(err1, err2); err != nil {
		c.fail(w, r, nil, http.StatusInternalServerError, "could not start a session")
		return
	}
	now := c.o.Now()
	s := session{Operator: who.operator, Principal: who.principal, CSRF: csrf, Expires: now.Add(c.o.SessionTTL)}
	if !who.principal.IsZero() {
		s.Sub = who.principal.Sub
		if jti, _ := who.principal.Claims["jti"].(string); jti != "" {
			s.JTI = jti
		}
		// A JWT login lasts no longer than the JWT.
		if exp, ok := who.principal.Claims["exp"].(float64); ok {
			if t := time.Unix(int64(exp), 0); t.Before(s.Expires) {
				s.Expires = t
			}
		}
	}
	data, _ := json.Marshal(s)
	if err := c.o.KV.Set(r.Context(), sessionKey(id), data, s.Expires.Sub(now)); err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "the state backend is unavailable; try again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(r), Value: id, Path: cookiePath(r), HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, Expires: s.Expires, MaxAge: int(s.Expires.Sub(now).Seconds())})
	c.report(r, &s, Action{Method: "admin/console.login", Status: http.StatusSeeOther})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// cookiePath is /ui/ on plain HTTP; the __Host- cookie over TLS must have
// Path=/.
func cookiePath(r *http.Request) string {
	if r.TLS != nil {
		return "/"
	}
	return ConsolePrefix
}

func (c *console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if ck, err := r.Cookie(c.cookieName(r)); err == nil {
		_ = c.o.KV.Delete(r.Context(), sessionKey(ck.Value))
	}
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(r), Value: "", Path: cookiePath(r), HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	c.report(r, s, Action{Method: "admin/console.logout", Status: http.StatusSeeOther})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// report hands an operator's action to OnAction (the runtime writes its
// receipt).
func (c *console) report(r *http.Request, s *session, a Action) {
	if c.o.OnAction == nil || s == nil {
		return
	}
	a.Operator, a.Principal = s.Operator, s.Principal
	c.o.OnAction(r, a)
}

// actionFunc performs one state change; it returns the target it concerned
// and an error (an *apiError, or an internal one).
type actionFunc func(r *http.Request, s *session) (target string, err error)

// action runs a state change, receipts it as admin/console.<name> (a
// {param} in name is the request's path value), and sends the browser
// back to page (Post/Redirect/Get), or shows the error.
func (c *console) action(page, name string, fn actionFunc) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		method := "admin/console." + expandName(name, r)
		target, err := fn(r, s)
		comment := oneLine(r.PostFormValue("comment"))
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				c.api.log.Error("console action failed", "method", method, "err", err)
				ae = &apiError{status: http.StatusInternalServerError, code: "internal", msg: "the action failed"}
			}
			c.report(r, s, Action{Method: method, Target: target, Status: ae.status, Err: ae.code, Comment: comment})
			c.fail(w, r, s, ae.status, ae.msg)
			return
		}
		c.report(r, s, Action{Method: method, Target: target, Status: http.StatusSeeOther, Comment: comment})
		c.api.log.Info("console action", "method", method, "target", target, "operator", s.Operator)
		http.Redirect(w, r, "/ui/"+page+"?done="+url.QueryEscape(expandName(name, r)), http.StatusSeeOther)
	}
}

// expandName replaces {verdict}, {verb} and {kind} with the request's
// path values (the routes constrain them before any action runs).
func expandName(name string, r *http.Request) string {
	for _, k := range []string{"verdict", "verb", "kind"} {
		name = strings.ReplaceAll(name, "{"+k+"}", r.PathValue(k))
	}
	return name
}

func (c *console) decide(r *http.Request, s *session) (string, error) {
	if c.o.Approvals == nil {
		return "", errNoApprovals()
	}
	id := r.PathValue("id")
	fn := c.o.Approvals.Grant
	switch r.PathValue("verdict") {
	case "grant":
	case "deny":
		fn = c.o.Approvals.Deny
	default:
		return id, badRequest("the verdict is grant or deny")
	}
	_, err := fn(r.Context(), id, s.Operator, c.o.Now())
	return id, classify(err)
}

func (c *console) incidentMode(r *http.Request, s *session) (string, error) {
	switch r.PathValue("verb") {
	case "enable":
		return "", classify(c.o.Incident.Enable(r.Context(), s.Operator, oneLine(r.PostFormValue("reason")), r.PostFormValue("deny_min_risk")))
	case "disable":
		return "", classify(c.o.Incident.Disable(r.Context()))
	}
	return "", &apiError{status: http.StatusNotFound, code: "not_found", msg: "no such incident action"}
}

// formList reads a comma- or newline-separated form field.
func formList(r *http.Request, name string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(r.PostFormValue(name), func(c rune) bool { return c == ',' || c == '\n' || c == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c *console) addKill(r *http.Request, s *session) (string, error) {
	k := policy.KillRule{All: r.PostFormValue("all") == "on", MinRisk: r.PostFormValue("min_risk"),
		ToolClass: formList(r, "tool_class"), Server: formList(r, "server"), Namespace: formList(r, "namespace"),
		ToolID: formList(r, "tool_id"), Reason: oneLine(r.PostFormValue("reason")), By: s.Operator}
	added, err := c.o.Incident.AddKill(r.Context(), k)
	return added.ID, classify(err)
}

func (c *console) removeKill(r *http.Request, _ *session) (string, error) {
	id := r.PathValue("id")
	return id, classify(c.o.Incident.RemoveKill(r.Context(), id))
}

// revocationKinds maps a form's kind to the incident store's operations.
func (c *console) revocationKind(kind string) (revoke func(context.Context, string, string, string, time.Time) error, restore func(context.Context, string) error, ok bool) {
	in := c.o.Incident
	switch kind {
	case "principal":
		return in.RevokePrincipal, in.RestorePrincipal, true
	case "token":
		return in.RevokeToken, in.RestoreToken, true
	case "session":
		return in.Quarantine, in.Release, true
	}
	return nil, nil, false
}

func (c *console) revoke(r *http.Request, s *session) (string, error) {
	revoke, _, ok := c.revocationKind(r.PathValue("kind"))
	if !ok {
		return "", badRequest("the kind is principal, token or session")
	}
	id := strings.TrimSpace(r.PostFormValue("id"))
	if id == "" {
		return "", badRequest("an id is required")
	}
	var until time.Time
	if u := strings.TrimSpace(r.PostFormValue("for")); u != "" {
		d, err := time.ParseDuration(u)
		if err != nil || d <= 0 {
			return id, badRequest("for is a duration such as 30m or 24h")
		}
		until = c.o.Now().Add(d)
	}
	return id, classify(revoke(r.Context(), id, s.Operator, oneLine(r.PostFormValue("reason")), until))
}

func (c *console) restore(r *http.Request, _ *session) (string, error) {
	_, restore, ok := c.revocationKind(r.PathValue("kind"))
	if !ok {
		return "", badRequest("the kind is principal, token or session")
	}
	id := r.PathValue("id")
	return id, classify(restore(r.Context(), id))
}

// revokeCapability revokes capability tokens by jti, holder (a principal
// key) or signing key id; revoking a token revokes its attenuations.
func (c *console) revokeCapability(r *http.Request, s *session) (string, error) {
	if c.o.Capabilities == nil {
		return "", &apiError{status: http.StatusNotFound, code: "not_found", msg: "capability tokens are not enabled"}
	}
	kind, subject := r.PostFormValue("kind"), strings.TrimSpace(r.PostFormValue("id"))
	switch kind {
	case capability.RevokeJTI, capability.RevokeHolder, capability.RevokeKey:
	default:
		return "", badRequest("revoke by jti, holder or kid")
	}
	if subject == "" {
		return "", badRequest("an id is required")
	}
	err := c.o.Capabilities.Revoke(r.Context(), capability.Revocation{Kind: kind, Subject: subject, By: s.Operator, At: c.o.Now(),
		Reason: oneLine(r.PostFormValue("reason"))})
	if errors.Is(err, capability.ErrMalformed) {
		return subject, badRequest("%v", err)
	}
	return subject, classify(err)
}
