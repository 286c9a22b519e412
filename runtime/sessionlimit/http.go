package sessionlimit

import (
	"net/http"
	"sync"
)

// SessionHeader is the HTTP header of an MCP session id (streamable HTTP).
const SessionHeader = "Mcp-Session-Id"

// Session is a live session a Handler waits on; the go-sdk's
// *mcp.ServerSession is one.
type Session interface {
	// Wait returns when the session has ended.
	Wait() error
}

// HandlerOptions configure Handler (Key, Find and Refuse required) and
// InFlight (Key and Refuse).
type HandlerOptions struct {
	// Key names the principal of a request.
	Key func(*http.Request) string
	// Find returns the live session with id, false when there is none
	// (it ended already, or never opened).
	Find func(id string) (Session, bool)
	// Refuse answers a request refused with ErrPrincipal or ErrTotal.
	Refuse func(http.ResponseWriter, *http.Request, error)
}

// Handler wraps a streamable HTTP handler that keeps sessions: a POST
// without a session id opens a session there, so it gets a slot first or
// is refused. The slot is held while the session lives: it is released
// when the answer opened no session, when the client deletes the session,
// and when the session ends otherwise (reaped when idle, closed at
// shutdown). One goroutine per held slot waits for its session's end.
func (l *Limiter) Handler(next http.Handler, o HandlerOptions) http.Handler {
	h := &handler{l: l, next: next, o: o, held: map[string]*Slot{}}
	return h
}

// InFlight wraps a handler of sessionless requests (protocol 2026-07-28):
// each request holds a slot while it is served, the same slots sessions
// hold, so a principal's open sessions and requests in flight together
// stay within its bound. A request refused a slot never reaches next.
func (l *Limiter) InFlight(next http.Handler, o HandlerOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		slot, err := l.Acquire(o.Key(req))
		if err != nil {
			o.Refuse(w, req, err)
			return
		}
		defer slot.Release()
		next.ServeHTTP(w, req)
	})
}

type handler struct {
	l    *Limiter
	next http.Handler
	o    HandlerOptions

	mu   sync.Mutex
	held map[string]*Slot // session id -> its slot
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get(SessionHeader)
	switch {
	case req.Method == http.MethodPost && id == "":
		h.open(w, req)
	case req.Method == http.MethodDelete && id != "":
		sw := &statusWriter{ResponseWriter: w}
		h.next.ServeHTTP(sw, req)
		if sw.status >= 200 && sw.status < 300 {
			h.release(id)
		}
	default:
		h.next.ServeHTTP(w, req)
	}
}

// open admits a request that may open a session.
func (h *handler) open(w http.ResponseWriter, req *http.Request) {
	slot, err := h.l.Acquire(h.o.Key(req))
	if err != nil {
		h.o.Refuse(w, req, err)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	h.next.ServeHTTP(sw, req)
	id := sw.Header().Get(SessionHeader)
	if id == "" {
		slot.Release()
		return
	}
	ss, ok := h.o.Find(id)
	if !ok {
		// Opened and already closed (an initialize that failed).
		slot.Release()
		return
	}
	h.mu.Lock()
	h.held[id] = slot
	h.mu.Unlock()
	go func() {
		_ = ss.Wait()
		h.release(id)
	}()
}

// release gives back the slot of session id, once.
func (h *handler) release(id string) {
	h.mu.Lock()
	slot := h.held[id]
	delete(h.held, id)
	h.mu.Unlock()
	if slot != nil {
		slot.Release()
	}
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer's flusher.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
