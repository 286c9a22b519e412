package capability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// A restricted principal's calls are requests (spec 004's privilege
// separation): kept here until a full principal fulfils or refuses them.

const toolRequestPrefix = "capability/toolrequest/"

// Request states: pending -> running -> fulfilled | failed, or pending ->
// refused; pending requests expire.
const (
	RequestPending   = "pending"
	RequestRunning   = "running"
	RequestFulfilled = "fulfilled"
	RequestFailed    = "failed"
	RequestRefused   = "refused"
)

// Errors of the request store.
var (
	ErrRequestNotFound = errors.New("capability: no such request")
	ErrRequestDecided  = errors.New("capability: the request is no longer pending")
)

// ToolRequest is a restricted principal's call, waiting to be run on its
// behalf.
type ToolRequest struct {
	ID string `json:"request_id"`
	// Requester is who asked; the call runs as this principal.
	Requester identity.Principal `json:"requester"`
	ToolID    string             `json:"tool_id"`
	// Call is the tool_execute arguments as the requester sent them (args,
	// idempotency_key, expected_document_hashes, tool_class).
	Call json.RawMessage `json:"call"`
	// CapabilityJTI is the capability the requester presented, validated
	// when the request was made.
	CapabilityJTI string    `json:"capability_jti,omitempty"`
	Status        string    `json:"status"`
	RequestedAt   time.Time `json:"requested_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	FulfilledBy   string    `json:"fulfilled_by,omitempty"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
	// Result is the call's result (a tool result as JSON), for the
	// requester to read.
	Result json.RawMessage `json:"result,omitempty"`
}

// Requests stores tool requests in a state.KV shared by every replica.
type Requests struct {
	kv  state.KV
	ttl time.Duration
}

// NewRequests returns a request store; a pending request lapses after ttl
// and a decided one is kept for ttl after its decision.
func NewRequests(kv state.KV, ttl time.Duration) *Requests {
	return &Requests{kv: kv, ttl: ttl}
}

// Create records a new pending request.
func (s *Requests) Create(ctx context.Context, r ToolRequest, now time.Time) (ToolRequest, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return ToolRequest{}, err
	}
	r.ID, r.Status, r.RequestedAt, r.ExpiresAt = id.String(), RequestPending, now, now.Add(s.ttl)
	b, err := json.Marshal(r)
	if err != nil {
		return ToolRequest{}, err
	}
	if _, err := s.kv.Create(ctx, toolRequestPrefix+r.ID, b, s.ttl); err != nil {
		return ToolRequest{}, err
	}
	return r, nil
}

func (s *Requests) get(ctx context.Context, id string) (ToolRequest, []byte, error) {
	if state.CheckKey(toolRequestPrefix+id) != nil {
		return ToolRequest{}, nil, ErrRequestNotFound
	}
	b, err := s.kv.Get(ctx, toolRequestPrefix+id)
	if errors.Is(err, state.ErrNotFound) {
		return ToolRequest{}, nil, ErrRequestNotFound
	}
	if err != nil {
		return ToolRequest{}, nil, err
	}
	var r ToolRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return ToolRequest{}, nil, fmt.Errorf("capability: request %s: %w", id, err)
	}
	return r, b, nil
}

// Get returns the request id.
func (s *Requests) Get(ctx context.Context, id string) (ToolRequest, error) {
	r, _, err := s.get(ctx, id)
	return r, err
}

// List returns the live requests (at most state.MaxScan), oldest first.
func (s *Requests) List(ctx context.Context) ([]ToolRequest, error) {
	es, err := s.kv.Scan(ctx, toolRequestPrefix, state.MaxScan)
	if err != nil {
		return nil, err
	}
	out := make([]ToolRequest, 0, len(es))
	for _, e := range es {
		var r ToolRequest
		if json.Unmarshal(e.Value, &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Claim moves a pending request to running for fulfiller, atomically: of
// two fulfillers racing, on any replicas, one gets it.
func (s *Requests) Claim(ctx context.Context, id, fulfiller string, now time.Time) (ToolRequest, error) {
	return s.decide(ctx, id, fulfiller, RequestRunning, nil, now)
}

// Refuse ends a pending request unfulfilled.
func (s *Requests) Refuse(ctx context.Context, id, by string, now time.Time) (ToolRequest, error) {
	return s.decide(ctx, id, by, RequestRefused, nil, now)
}

func (s *Requests) decide(ctx context.Context, id, by, status string, result json.RawMessage, now time.Time) (ToolRequest, error) {
	r, old, err := s.get(ctx, id)
	if err != nil {
		return ToolRequest{}, err
	}
	if r.Status != RequestPending || !now.Before(r.ExpiresAt) {
		return r, ErrRequestDecided
	}
	r.Status, r.FulfilledBy, r.DecidedAt, r.Result = status, by, now, result
	b, err := json.Marshal(r)
	if err != nil {
		return ToolRequest{}, err
	}
	ok, err := s.kv.Swap(ctx, toolRequestPrefix+id, old, b, s.ttl)
	if err != nil {
		return ToolRequest{}, err
	}
	if !ok {
		return r, ErrRequestDecided
	}
	return r, nil
}

// Finish records the result of a claimed request: fulfilled, or failed
// when the call ended with a gateway error.
func (s *Requests) Finish(ctx context.Context, r ToolRequest, failed bool, result json.RawMessage, now time.Time) error {
	r.Status, r.Result, r.DecidedAt = RequestFulfilled, result, now
	if failed {
		r.Status = RequestFailed
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, toolRequestPrefix+r.ID, b, s.ttl)
}
