package admin

import (
	"errors"
	"net/http"
	"time"

	"github.com/quiver-mcp/quiver/runtime/capability"
)

// The capability endpoints (spec 004), when Options.Capabilities is set:
//
//	GET    /admin/v1/capabilities                   live tokens (ids, holders, thumbprints; never token text)
//	GET    /admin/v1/capabilities/revocations       the revocation list
//	POST   /admin/v1/capabilities/revocations       {"jti" | "holder" | "kid", "reason"?}
//	GET    /admin/v1/capabilities/requests/{id}     what the capability request awaiting approval id asks
//	GET    /admin/v1/tool-requests                  restricted principals' requests
//
// A revocation is in force at the next call on every replica; revoking a
// token revokes every token attenuated from it.
func (h *handler) capabilityRoutes() {
	if h.o.Capabilities == nil {
		return
	}
	m := h.mux
	m.HandleFunc("GET /admin/v1/capabilities", h.op("admin/capabilities.list", h.listCapabilities))
	m.HandleFunc("GET /admin/v1/capabilities/revocations", h.op("admin/capabilities.revocations", h.listCapabilityRevocations))
	m.HandleFunc("POST /admin/v1/capabilities/revocations", h.op("admin/capability.revoke", h.revokeCapability))
	m.HandleFunc("GET /admin/v1/capabilities/requests/{id}", h.op("admin/capability_request.get", h.getCapabilityRequest))
	if h.o.ToolRequests != nil {
		m.HandleFunc("GET /admin/v1/tool-requests", h.op("admin/tool_requests.list", h.listToolRequests))
	}
}

func (h *handler) listToolRequests(r *http.Request, _ caller) (string, int, any, error) {
	reqs, err := h.o.ToolRequests.List(r.Context())
	if err != nil {
		return "", 0, nil, classify(err)
	}
	type view struct {
		ID          string    `json:"request_id"`
		Requester   string    `json:"requester"`
		ToolID      string    `json:"tool_id"`
		Status      string    `json:"status"`
		RequestedAt time.Time `json:"requested_at"`
		FulfilledBy string    `json:"fulfilled_by,omitempty"`
	}
	out := make([]view, 0, len(reqs))
	for _, q := range reqs {
		out = append(out, view{q.ID, q.Requester.Key(), q.ToolID, q.Status, q.RequestedAt, q.FulfilledBy})
	}
	return "", http.StatusOK, map[string]any{"tool_requests": out}, nil
}

func (h *handler) listCapabilities(r *http.Request, _ caller) (string, int, any, error) {
	recs, err := h.o.Capabilities.Records(r.Context())
	if err != nil {
		return "", 0, nil, classify(err)
	}
	return "", http.StatusOK, map[string]any{"capabilities": recs}, nil
}

// getCapabilityRequest shows what a capability request awaiting approval
// asks for (the approval names only the tools).
func (h *handler) getCapabilityRequest(r *http.Request, _ caller) (string, int, any, error) {
	id := r.PathValue("id")
	p, ok, err := h.o.Capabilities.Pending(r.Context(), id)
	switch {
	case err != nil:
		return id, 0, nil, classify(err)
	case !ok:
		return id, 0, nil, &apiError{status: http.StatusNotFound, code: "not_found", msg: "no capability request for this approval"}
	}
	return id, http.StatusOK, p, nil
}

func (h *handler) listCapabilityRevocations(r *http.Request, _ caller) (string, int, any, error) {
	rvs, err := h.o.Capabilities.Revocations(r.Context())
	if err != nil {
		return "", 0, nil, classify(err)
	}
	return "", http.StatusOK, map[string]any{"revocations": rvs}, nil
}

func (h *handler) revokeCapability(r *http.Request, c caller) (string, int, any, error) {
	var body struct {
		JTI    string `json:"jti"`
		Holder string `json:"holder"`
		KID    string `json:"kid"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &body); err != nil {
		return "", 0, nil, err
	}
	rv := capability.Revocation{By: c.operator, At: h.o.Now(), Reason: oneLine(body.Reason)}
	n := 0
	for _, k := range []struct{ kind, v string }{{capability.RevokeJTI, body.JTI}, {capability.RevokeHolder, body.Holder}, {capability.RevokeKey, body.KID}} {
		if k.v != "" {
			rv.Kind, rv.Subject = k.kind, k.v
			n++
		}
	}
	if n != 1 {
		return "", 0, nil, badRequest("give exactly one of jti, holder (a principal key) and kid")
	}
	err := h.o.Capabilities.Revoke(r.Context(), rv)
	if errors.Is(err, capability.ErrMalformed) {
		return rv.Subject, 0, nil, badRequest("%v", err)
	}
	res, err := okPersist(err, rv)
	return rv.Subject, http.StatusOK, res, err
}
