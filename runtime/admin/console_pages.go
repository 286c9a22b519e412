package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/capability"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// pageNames are the templates under ui/ besides layout.html.
var pageNames = []string{"login", "error", "fleet", "catalog", "tool", "receipts", "receipt", "approvals", "incident"}

var templateFuncs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"ms": func(d time.Duration) string {
		if d == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	},
	"pct":  func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"join": strings.Join,
	"list": func(s ...string) []string { return s },
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode())
	},
	"statusClass": func(s string) string {
		switch s {
		case "ready", "allow", "success", "granted":
			return "ok"
		case "starting", "require_approval", "pending", "degraded":
			return "warn"
		}
		return "bad"
	},
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(uiFiles, "ui/layout.html", "ui/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// view is what the layout renders around a page.
type view struct {
	Page     string
	Operator string
	CSRF     string
	Done     string
	Error    string
	Data     any
}

// render writes page with data; s is nil before login.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, page string, s *session, data any) {
	v := view{Page: page, Data: data, Done: oneLine(r.URL.Query().Get("done"))}
	if m, ok := data.(map[string]any); ok {
		if e, ok := m["Error"].(string); ok {
			v.Error = e
		}
	}
	if s != nil {
		v.Operator, v.CSRF = s.Operator, s.CSRF
	}
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.api.log.Error("console page failed", "page", page, "err", err)
		http.Error(w, "the page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error page with a one-line message.
func (c *console) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	c.render(w, r, status, "error", s, map[string]any{"Status": status, "Error": oneLine(msg)})
}

func (c *console) fleet(w http.ResponseWriter, r *http.Request, s *session) {
	ups := c.o.Fleet.Upstreams(r.Context())
	c.render(w, r, http.StatusOK, "fleet", s, map[string]any{"Upstreams": ups, "Window": fmt.Sprintf("%d minutes", int(RecentWindow.Minutes()))})
}

// maxClaimsBytes caps the claims JSON of the catalog's principal.
const maxClaimsBytes = 4 << 10

// principalOf reads the principal the catalog browses as: as (a subject)
// and claims (a JSON object). No subject is an anonymous caller.
func principalOf(q url.Values) (identity.Principal, error) {
	sub := strings.TrimSpace(q.Get("as"))
	raw := strings.TrimSpace(q.Get("claims"))
	if len(sub) > 256 || len(raw) > maxClaimsBytes {
		return identity.Principal{}, badRequest("the principal is too long")
	}
	if sub == "" {
		if raw != "" {
			return identity.Principal{}, badRequest("claims need a subject")
		}
		return identity.Principal{}, nil
	}
	p := identity.Principal{Sub: sub, ActorType: identity.ActorUser, Claims: map[string]any{}}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &p.Claims); err != nil || p.Claims == nil {
			return identity.Principal{}, badRequest("claims must be a JSON object")
		}
	}
	return p, nil
}

func (c *console) catalog(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	data := map[string]any{"Q": q.Get("q"), "Path": q.Get("path"), "As": q.Get("as"), "Claims": q.Get("claims")}
	as, err := principalOf(q)
	if err != nil {
		c.pageError(w, r, s, "catalog", data, err)
		return
	}
	bq := BrowseQuery{Query: strings.TrimSpace(q.Get("q")), Path: strings.TrimSpace(q.Get("path")), Cursor: q.Get("cursor"), TopK: catalogTopK}
	if len(bq.Query) > 1024 || len(bq.Path) > 1024 || len(bq.Cursor) > 1024 {
		c.pageError(w, r, s, "catalog", data, badRequest("the query is too long"))
		return
	}
	if bq.Query != "" && bq.Path != "" {
		c.pageError(w, r, s, "catalog", data, badRequest("give a query or a path, not both"))
		return
	}
	if bq.Query == "" && bq.Path == "" {
		// The root, without writing it into the form (a query typed
		// next must not come with a path).
		bq.Path = "/"
	}
	page, err := c.o.Fleet.Browse(r.Context(), as, bq)
	if err != nil {
		c.pageError(w, r, s, "catalog", data, badRequest("%v", err))
		return
	}
	data["Page"] = page
	c.render(w, r, http.StatusOK, "catalog", s, data)
}

// pageError renders page with a 4xx error (or 503 when the state is
// down) above what data holds.
func (c *console) pageError(w http.ResponseWriter, r *http.Request, s *session, page string, data map[string]any, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, msg: "the page failed"}
		c.api.log.Error("console page failed", "page", page, "err", err)
	}
	data["Error"] = ae.msg
	c.render(w, r, ae.status, page, s, data)
}

func (c *console) tool(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	id := q.Get("id")
	as, err := principalOf(q)
	if err != nil {
		c.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	d, ok := c.o.Fleet.Tool(r.Context(), as, id)
	if !ok || len(id) > 1024 {
		c.fail(w, r, s, http.StatusNotFound, "no such tool (or the chosen principal may not see it)")
		return
	}
	data := map[string]any{"Tool": d, "As": q.Get("as"), "Claims": q.Get("claims")}
	if c.o.Receipts.Dir != "" {
		recent, _, err := c.o.Receipts.Newest(r.Context(), receipts.Filter{ToolID: policy.QuoteGlob(d.ID)}, receipts.Position{}, 20)
		if err == nil {
			data["Recent"] = recent
		}
	}
	c.render(w, r, http.StatusOK, "tool", s, data)
}

func (c *console) approvals(w http.ResponseWriter, r *http.Request, s *session) {
	if c.o.Approvals == nil {
		c.render(w, r, http.StatusOK, "approvals", s, map[string]any{"Off": true})
		return
	}
	pending, err := c.o.Approvals.Pending(r.Context())
	if err != nil {
		c.pageError(w, r, s, "approvals", map[string]any{}, classify(err))
		return
	}
	slices.SortFunc(pending, func(a, b policy.Approval) int { return a.RequestedAt.Compare(b.RequestedAt) })
	rows := make([]approvalRow, 0, len(pending))
	for _, a := range pending {
		row := approvalRow{Approval: a}
		if c.o.Capabilities != nil {
			// A capability request waits in the same queue: what it
			// asks for (tools, duration, uses, reason, holder key).
			if p, ok, err := c.o.Capabilities.Pending(r.Context(), a.ID); err == nil && ok {
				row.Capability = &p
			}
		}
		rows = append(rows, row)
	}
	data := map[string]any{"Pending": rows, "Now": c.o.Now()}
	if c.o.ToolRequests != nil {
		reqs, err := c.o.ToolRequests.List(r.Context())
		if err != nil {
			c.pageError(w, r, s, "approvals", data, classify(err))
			return
		}
		slices.SortFunc(reqs, func(a, b capability.ToolRequest) int { return b.RequestedAt.Compare(a.RequestedAt) })
		data["ToolRequests"] = reqs
	}
	c.render(w, r, http.StatusOK, "approvals", s, data)
}

// approvalRow is one pending approval, with the capability request it
// stands for, if it is one.
type approvalRow struct {
	policy.Approval
	Capability *capability.PendingRequest
}

// revocationRow is one line of the incident page's revocation tables.
type revocationRow struct {
	ID string
	policy.Revocation
}

func rows(m map[string]policy.Revocation) []revocationRow {
	out := make([]revocationRow, 0, len(m))
	for id, rv := range m {
		out = append(out, revocationRow{ID: id, Revocation: rv})
	}
	slices.SortFunc(out, func(a, b revocationRow) int { return b.At.Compare(a.At) })
	return out
}

func (c *console) incident(w http.ResponseWriter, r *http.Request, s *session) {
	st, err := c.o.Incident.State(r.Context())
	if err != nil {
		c.pageError(w, r, s, "incident", map[string]any{}, classify(err))
		return
	}
	data := map[string]any{"State": st, "Rows": map[string][]revocationRow{
		"principal": rows(st.Principals), "token": rows(st.Tokens), "session": rows(st.Sessions)}, "Risks": []string{"LOW", "MEDIUM", "HIGH", "CRITICAL"}}
	if c.o.Capabilities != nil {
		rvs, err := c.o.Capabilities.Revocations(r.Context())
		if err != nil {
			c.pageError(w, r, s, "incident", data, classify(err))
			return
		}
		slices.SortFunc(rvs, func(a, b capability.Revocation) int { return b.At.Compare(a.At) })
		data["Capabilities"] = true
		data["CapabilityRevocations"] = rvs
	}
	c.render(w, r, http.StatusOK, "incident", s, data)
}

// static lists the embedded assets (for tests).
func staticFiles() ([]string, error) {
	var out []string
	err := fs.WalkDir(uiFiles, "ui/static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, "ui/static/"))
		}
		return err
	})
	return out, err
}
