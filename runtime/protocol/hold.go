package protocol

// Held calls. An upstream at protocol 2025-11-25 or older asks for input
// (elicitation, sampling, roots) with a request in the middle of a call;
// a client at 2026-07-28 takes no such request, it takes an input_required
// result and retries. To pair them, the upstream call runs detached from
// the client's request: when the upstream asks, the request is parked, the
// client gets an input_required result at once (with a sealed state that
// names the held call), and its retry hands the answer to the parked
// request and waits for what the call does next. A held call waits for the
// retry at most the hold timeout, in a bounded table, on the replica that
// runs it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Errors of the held calls.
var (
	// ErrHoldFull: the table of held calls is full (load shedding).
	ErrHoldFull = errors.New("too many held calls")
	// ErrHoldGone: the held call is not (or no longer) in the table: it
	// expired, was cancelled, or is held by another replica or process.
	ErrHoldGone = errors.New("the held call has ended")
	// ErrHoldClosed: the table is closed.
	ErrHoldClosed = errors.New("the held calls are closed")
)

// DefaultHoldTimeout is how long a held call waits for the client's retry
// unless configured otherwise.
const DefaultHoldTimeout = 60 * time.Second

// DefaultMaxHeld bounds the calls held at once unless configured otherwise.
const DefaultMaxHeld = 1024

// AsksMidCall reports whether an upstream that negotiated version asks for
// input with requests in the middle of a call (every revision before the
// sessionless one; an upstream not connected yet counts as one).
func AsksMidCall(version string) bool { return version < Sessionless }

// HoldOptions configure Holds.
type HoldOptions struct {
	// Timeout is how long a held call waits for the retry
	// (DefaultHoldTimeout when 0).
	Timeout time.Duration
	// Max bounds the calls held at once (DefaultMaxHeld when 0).
	Max int
}

// Holds is the table of the calls of one replica that wait for a client's
// answer. It owns the goroutine of every call it starts: Close cancels
// them and waits for them.
type Holds struct {
	timeout time.Duration
	max     int
	replica string

	mu     sync.Mutex
	held   map[string]*Held
	live   map[*Held]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewHolds returns an empty table with a replica name of its own.
func NewHolds(o HoldOptions) (*Holds, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultHoldTimeout
	}
	if o.Max <= 0 {
		o.Max = DefaultMaxHeld
	}
	rep, err := randomID(8)
	if err != nil {
		return nil, err
	}
	return &Holds{timeout: o.Timeout, max: o.Max, replica: rep, held: map[string]*Held{}, live: map[*Held]struct{}{}}, nil
}

// Replica names this table in the states it seals: a retry whose state
// names another replica cannot resume here.
func (hs *Holds) Replica() string { return hs.replica }

// Timeout is how long a held call waits for the retry.
func (hs *Holds) Timeout() time.Duration { return hs.timeout }

// Len is the number of calls held now.
func (hs *Holds) Len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.held)
}

func randomID(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Held is one upstream call run for a sessionless client. Between Next
// and the client's retry it is either running on behalf of a waiting
// request (whose end cancels it) or held in the table (whose timeout
// cancels it).
type Held struct {
	hs     *Holds
	id     string
	ctx    context.Context
	cancel context.CancelFunc

	// asks carries the call's input requests to the request waiting in
	// Next, one at a time.
	asks chan *pending
	turn chan struct{}
	done chan struct{}
	res  any
	err  error

	mu      sync.Mutex
	seq     int
	current *pending
	timer   *time.Timer
	inTable bool
}

// Waiting reports whether the call is in the table, waiting for the
// client's retry: its upstream is blocked on the request handed to the
// client, with no request of the client's waiting for it.
func (h *Held) Waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inTable
}

// pending is one input request of the call waiting for its answer.
type pending struct {
	id     string
	req    mcp.InputRequest
	answer chan answer
}

type answer struct {
	resp mcp.InputResponse
	err  error
}

type heldKey struct{}

// HeldOf returns the held call whose context ctx is (nil for another
// context): the hooks that receive an upstream's requests find the call
// they belong to with it.
func HeldOf(ctx context.Context) *Held {
	h, _ := ctx.Value(heldKey{}).(*Held)
	return h
}

// Start runs call on a goroutine of the table's. Its context keeps ctx's
// values but not its cancellation: the request waiting in Next cancels it
// when it ends, and so does the hold timeout while the call is held.
func (hs *Holds) Start(ctx context.Context, call func(context.Context) (any, error)) (*Held, error) {
	h := &Held{hs: hs, asks: make(chan *pending), turn: make(chan struct{}, 1), done: make(chan struct{})}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.ctx, h.cancel = context.WithValue(cctx, heldKey{}, h), cancel
	hs.mu.Lock()
	if hs.closed {
		hs.mu.Unlock()
		cancel()
		return nil, ErrHoldClosed
	}
	hs.live[h] = struct{}{}
	hs.wg.Add(1)
	hs.mu.Unlock()
	go func() {
		defer hs.wg.Done()
		h.res, h.err = call(h.ctx)
		h.cancel()
		close(h.done)
		hs.mu.Lock()
		delete(hs.live, h)
		if h.id != "" && hs.held[h.id] == h {
			delete(hs.held, h.id)
		}
		hs.mu.Unlock()
	}()
	return h, nil
}

// ID names the call in sealed states once it is held ("" before: most
// calls never ask, and are never named).
func (h *Held) ID() string {
	h.hs.mu.Lock()
	defer h.hs.mu.Unlock()
	return h.id
}

// Event is what a call does next: ask for input (Request set, under ID) or
// end (Done, with its Result or Err).
type Event struct {
	ID      string
	Request mcp.InputRequest
	Done    bool
	Result  any
	Err     error
}

// Next waits for the call's next event on behalf of the request in ctx:
// when ctx ends first, the call is cancelled and Next returns ctx's error.
func (h *Held) Next(ctx context.Context) (Event, error) {
	stop := context.AfterFunc(ctx, h.cancel)
	defer stop()
	select {
	case p := <-h.asks:
		return Event{ID: p.id, Request: p.req}, nil
	case <-h.done:
		return Event{Done: true, Result: h.res, Err: h.err}, nil
	case <-ctx.Done():
		h.cancel()
		return Event{}, ctx.Err()
	}
}

// Ask is what the call does to ask the client for input: it parks ir until
// the client's answer reaches it through Answer, the call ends, or ctx
// ends.
func (h *Held) Ask(ctx context.Context, ir mcp.InputRequest) (mcp.InputResponse, error) {
	// One input request at a time: an upstream that asks several at once
	// has them answered in turn, one round each.
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, h.ended(ctx)
	case <-h.ctx.Done():
		return nil, ErrHoldGone
	}
	defer func() { <-h.turn }()
	h.mu.Lock()
	h.seq++
	p := &pending{id: "q" + strconv.Itoa(h.seq), req: ir, answer: make(chan answer, 1)}
	// Waiting from before it is handed over: the retry that answers it
	// may come as soon as it is.
	h.current = p
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.current == p {
			h.current = nil
		}
		h.mu.Unlock()
	}()
	select {
	case h.asks <- p:
	case <-ctx.Done():
		return nil, h.ended(ctx)
	case <-h.ctx.Done():
		return nil, ErrHoldGone
	}
	select {
	case a := <-p.answer:
		return a.resp, a.err
	case <-ctx.Done():
		return nil, h.ended(ctx)
	case <-h.ctx.Done():
		return nil, ErrHoldGone
	}
}

// ended is the error of an Ask whose ctx ended: ErrHoldGone when the call
// itself ended (ctx is often the call's own context, and both are done at
// once), else ctx's error.
func (h *Held) ended(ctx context.Context) error {
	if h.ctx.Err() != nil {
		return ErrHoldGone
	}
	return ctx.Err()
}

// Pending returns the id and request of the input request waiting for
// its answer (a retry without it is asked again).
func (h *Held) Pending() (string, mcp.InputRequest, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == nil {
		return "", nil, false
	}
	return h.current.id, h.current.req, true
}

// Answer hands the waiting input request id its answer (or a refusal,
// err) and reports whether it was the one waiting.
func (h *Held) Answer(id string, resp mcp.InputResponse, err error) bool {
	h.mu.Lock()
	p := h.current
	if p == nil || p.id != id {
		h.mu.Unlock()
		return false
	}
	h.current = nil
	h.mu.Unlock()
	p.answer <- answer{resp: resp, err: err}
	return true
}

// Cancel cancels the call.
func (h *Held) Cancel() { h.cancel() }

// Hold puts h in the table until its retry takes it (Take), or the timeout
// cancels it. A full table refuses it (ErrHoldFull).
func (hs *Holds) Hold(h *Held) error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	switch {
	case hs.closed:
		return ErrHoldClosed
	case h.ctx.Err() != nil:
		return ErrHoldGone
	case len(hs.held) >= hs.max:
		return ErrHoldFull
	}
	if h.id == "" {
		id, err := randomID(16)
		if err != nil {
			return err
		}
		h.id = id
	}
	hs.held[h.id] = h
	h.mu.Lock()
	h.inTable = true
	h.timer = time.AfterFunc(hs.timeout, func() { hs.expire(h) })
	h.mu.Unlock()
	return nil
}

// expire ends a call that waited for its retry longer than the timeout.
func (hs *Holds) expire(h *Held) {
	hs.mu.Lock()
	if hs.held[h.id] == h {
		delete(hs.held, h.id)
	}
	hs.mu.Unlock()
	h.mu.Lock()
	h.inTable = false
	h.mu.Unlock()
	h.cancel()
}

// Take removes the call id from the table for the retry that resumes it:
// a call taken once cannot be taken again.
func (hs *Holds) Take(id string) (*Held, error) {
	hs.mu.Lock()
	h, ok := hs.held[id]
	if ok {
		delete(hs.held, id)
	}
	hs.mu.Unlock()
	if !ok {
		return nil, ErrHoldGone
	}
	h.mu.Lock()
	stopped := h.timer == nil || h.timer.Stop()
	h.inTable = false
	h.mu.Unlock()
	if !stopped || h.ctx.Err() != nil {
		// The timeout fired as the retry arrived.
		h.cancel()
		return nil, ErrHoldGone
	}
	return h, nil
}

// Close cancels every call, held or running, and waits for their
// goroutines; later Starts fail.
func (hs *Holds) Close() {
	hs.mu.Lock()
	hs.closed = true
	for h := range hs.live {
		h.cancel()
	}
	for id, h := range hs.held {
		h.mu.Lock()
		if h.timer != nil {
			h.timer.Stop()
		}
		h.mu.Unlock()
		delete(hs.held, id)
	}
	hs.mu.Unlock()
	hs.wg.Wait()
}
