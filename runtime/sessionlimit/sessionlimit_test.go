package sessionlimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

func TestAcquireRelease(t *testing.T) {
	l := New(Limits{PerPrincipal: 2, Total: 3})
	steps := []struct {
		key  string
		want error
	}{
		{"a", nil}, {"a", nil}, {"a", ErrPrincipal}, {"b", nil}, {"c", ErrTotal}, {"b", ErrTotal},
	}
	var slots []*Slot
	for i, s := range steps {
		slot, err := l.Acquire(s.key)
		if !errors.Is(err, s.want) {
			t.Fatalf("step %d (%s): %v, want %v", i, s.key, err, s.want)
		}
		if slot != nil {
			slots = append(slots, slot)
		}
	}
	if l.Open() != 3 || l.Held("a") != 2 {
		t.Fatalf("open %d, a holds %d", l.Open(), l.Held("a"))
	}
	// Releasing twice frees one slot.
	slots[0].Release()
	slots[0].Release()
	if l.Open() != 2 || l.Held("a") != 1 {
		t.Fatalf("after release: open %d, a holds %d", l.Open(), l.Held("a"))
	}
	if _, err := l.Acquire("c"); err != nil {
		t.Fatalf("a freed slot is not given: %v", err)
	}
	for _, s := range slots {
		s.Release()
	}
	if l.Open() != 1 || l.Held("a") != 0 {
		t.Fatalf("all released: open %d, a holds %d", l.Open(), l.Held("a"))
	}
}

func TestAcquireConcurrent(t *testing.T) {
	l := New(Limits{PerPrincipal: 5, Total: 8})
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := strconv.Itoa(i % 3)
			if _, err := l.Acquire(key); err == nil {
				mu.Lock()
				got[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for k, n := range got {
		if n > 5 {
			t.Fatalf("%s got %d slots", k, n)
		}
		total += n
	}
	if total != 8 || l.Open() != 8 {
		t.Fatalf("%d slots given, open %d", total, l.Open())
	}
}

// session is a Session that ends when end is closed.
type session struct{ end chan struct{} }

func (s *session) Wait() error { <-s.end; return nil }

// TestHandler: a POST without a session id takes a slot, kept while the
// session it opened lives; a DELETE, the session's end, or an answer that
// opened no session gives it back; a refused request never reaches the
// wrapped handler.
func TestHandler(t *testing.T) {
	l := New(Limits{PerPrincipal: 1, Total: 2})
	var mu sync.Mutex
	live := map[string]*session{}
	seq := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.Header.Get(SessionHeader) == "" && r.URL.Query().Get("fail") == "":
			seq++
			id := "s" + strconv.Itoa(seq)
			live[id] = &session{end: make(chan struct{})}
			w.Header().Set(SessionHeader, id)
		case r.Method == http.MethodDelete:
			if s := live[r.Header.Get(SessionHeader)]; s != nil {
				delete(live, r.Header.Get(SessionHeader))
				close(s.end)
			}
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Query().Get("fail") != "":
			http.Error(w, "bad", http.StatusBadRequest)
		}
	})
	var refused []error
	h := l.Handler(next, HandlerOptions{
		Key: func(r *http.Request) string { return r.Header.Get("Who") },
		Find: func(id string) (Session, bool) {
			mu.Lock()
			defer mu.Unlock()
			s, ok := live[id]
			return s, ok
		},
		Refuse: func(w http.ResponseWriter, r *http.Request, err error) {
			refused = append(refused, err)
			w.WriteHeader(http.StatusTooManyRequests)
		},
	})
	do := func(method, who, id, query string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/mcp"+query, nil)
		req.Header.Set("Who", who)
		if id != "" {
			req.Header.Set(SessionHeader, id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	a1 := do(http.MethodPost, "a", "", "").Header().Get(SessionHeader)
	if a1 == "" || l.Held("a") != 1 {
		t.Fatalf("first session: %q, a holds %d", a1, l.Held("a"))
	}
	if w := do(http.MethodPost, "a", "", ""); w.Code != http.StatusTooManyRequests || len(refused) != 1 || !errors.Is(refused[0], ErrPrincipal) {
		t.Fatalf("second session of a: %d %v", w.Code, refused)
	}
	// A request of a's session is not a new session.
	if w := do(http.MethodPost, "a", a1, ""); w.Code != http.StatusOK {
		t.Fatalf("a request of the session: %d", w.Code)
	}
	// An answer that opened no session keeps no slot.
	if w := do(http.MethodPost, "b", "", "?fail=1"); w.Code != http.StatusBadRequest || l.Held("b") != 0 {
		t.Fatalf("failed open: %d, b holds %d", w.Code, l.Held("b"))
	}
	b1 := do(http.MethodPost, "b", "", "").Header().Get(SessionHeader)
	if w := do(http.MethodPost, "c", "", ""); w.Code != http.StatusTooManyRequests || !errors.Is(refused[len(refused)-1], ErrTotal) {
		t.Fatalf("third principal at total: %d %v", w.Code, refused)
	}
	// DELETE frees the slot before it answers.
	if w := do(http.MethodDelete, "a", a1, ""); w.Code != http.StatusNoContent || l.Held("a") != 0 {
		t.Fatalf("delete: %d, a holds %d", w.Code, l.Held("a"))
	}
	if do(http.MethodPost, "c", "", "").Header().Get(SessionHeader) == "" {
		t.Fatal("c is not admitted after a's session ended")
	}
	// A session that ends on its own (reaped) frees its slot.
	mu.Lock()
	close(live[b1].end)
	delete(live, b1)
	mu.Unlock()
	for l.Held("b") != 0 {
		// The waiter releases once Wait returns.
		runtime.Gosched()
	}
	if l.Open() != 1 {
		t.Fatalf("open %d after b's session ended", l.Open())
	}
}

// TestInFlight: a sessionless request holds a slot while it is served,
// counted with the sessions of its principal.
func TestInFlight(t *testing.T) {
	l := New(Limits{PerPrincipal: 2, Total: 10})
	held, _ := l.Acquire("a") // a session of a's
	entered, leave := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-leave
	})
	var refused []error
	h := l.InFlight(next, HandlerOptions{
		Key: func(r *http.Request) string { return r.Header.Get("Who") },
		Refuse: func(w http.ResponseWriter, r *http.Request, err error) {
			refused = append(refused, err)
			w.WriteHeader(http.StatusTooManyRequests)
		},
	})
	serve := func(who string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Who", who)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	done := make(chan struct{})
	go func() { serve("a"); close(done) }()
	<-entered
	if l.Held("a") != 2 {
		t.Fatalf("a holds %d while its request is served", l.Held("a"))
	}
	if w := serve("a"); w.Code != http.StatusTooManyRequests || len(refused) != 1 || !errors.Is(refused[0], ErrPrincipal) {
		t.Fatalf("a's second request in flight: %d %v", w.Code, refused)
	}
	close(leave)
	<-done
	if l.Held("a") != 1 {
		t.Fatalf("a holds %d after its request", l.Held("a"))
	}
	held.Release()
	if l.Open() != 0 {
		t.Fatalf("open %d", l.Open())
	}
}
