package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/choicecard/tokens"
)

// sharedCounter builds the cl100k counter once per test binary (building it
// parses 100k ranks).
var sharedCounter = sync.OnceValues(tokens.CL100K)

func counter(t testing.TB) *tokens.Counter {
	t.Helper()
	c, err := sharedCounter()
	if err != nil {
		t.Fatalf("CL100K: %v", err)
	}
	return c
}

// newStore opens the real Badger artifact store.
//
// It runs on disk under t.TempDir rather than in Badger's in-memory mode:
// artifacts.OpenBadger with InMemory currently rejects content over 64 KiB
// ("Value with size 1048576 exceeded 65536 limit": in-memory Badger has no
// value log, and the store's 1 MiB chunks exceed the inline value limit).
// Switch to artifacts.Options{InMemory: true} once that is fixed.
func newStore(t testing.TB) artifacts.Store {
	t.Helper()
	s, err := artifacts.OpenBadger(artifacts.Options{InMemory: true, SweepInterval: -1})
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newFirewall builds a firewall over a fresh store.
func newFirewall(t testing.TB, mod func(*Options)) *Firewall {
	t.Helper()
	o := Options{Store: newStore(t), Counter: counter(t)}
	if mod != nil {
		mod(&o)
	}
	return New(o)
}

// genLog generates a realistic log of at least size bytes: timestamps,
// levels, components, request ids, occasional warnings, errors, a Java-style
// exception with a stack trace and a Go panic.
func genLog(size int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	comps := []string{"http", "db", "cache", "auth", "worker", "scheduler"}
	paths := []string{"/api/v1/items", "/api/v1/users", "/healthz", "/api/v1/orders", "/metrics"}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.Grow(size + 256)
	for i := 0; b.Len() < size; i++ {
		ts := t0.Add(time.Duration(i) * 37 * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		comp := comps[r.IntN(len(comps))]
		switch x := r.IntN(1000); {
		case x < 6:
			fmt.Fprintf(&b, "%s ERROR [%s] request failed: upstream timeout after %dms req_id=%08x\n", ts, comp, 1000+r.IntN(9000), r.Uint32())
		case x < 30:
			fmt.Fprintf(&b, "%s WARN  [%s] slow query took %dms (threshold 500ms) req_id=%08x\n", ts, comp, 500+r.IntN(2000), r.Uint32())
		case x == 500 && r.IntN(20) == 0:
			fmt.Fprintf(&b, "%s ERROR [%s] unhandled exception\njava.lang.IllegalStateException: connection pool exhausted\n\tat com.example.db.Pool.acquire(Pool.java:214)\n\tat com.example.api.Handler.serve(Handler.java:88)\n", ts, comp)
		default:
			fmt.Fprintf(&b, "%s INFO  [%s] %s %s status=%d bytes=%d took=%dms req_id=%08x\n", ts, comp,
				[]string{"GET", "POST", "PUT"}[r.IntN(3)], paths[r.IntN(len(paths))], []int{200, 200, 200, 201, 204, 304, 404}[r.IntN(7)], r.IntN(50000), r.IntN(300), r.Uint32())
		}
	}
	return b.String()
}

// genJSON generates a JSON document of about size bytes.
func genJSON(size int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	type item struct {
		ID     int               `json:"id"`
		Name   string            `json:"name"`
		Tags   []string          `json:"tags"`
		Price  float64           `json:"price"`
		Active bool              `json:"active"`
		Attrs  map[string]string `json:"attrs"`
		Parent *int              `json:"parent"`
		Dims   map[string][]int  `json:"dims"`
	}
	var items []item
	n := 0
	for est := 0; est < size; est += 230 {
		it := item{ID: n + 1, Name: fmt.Sprintf("widget-%d", n+1), Tags: []string{"a/b", "c~d", "tag" + fmt.Sprint(r.IntN(50))},
			Price: float64(r.IntN(100000)) / 100, Active: r.IntN(2) == 0,
			Attrs: map[string]string{"color": []string{"red", "green", "blue"}[r.IntN(3)], "size": fmt.Sprint(r.IntN(10))},
			Dims:  map[string][]int{"hwd": {r.IntN(100), r.IntN(100), r.IntN(100)}}}
		if n > 0 {
			p := r.IntN(n) + 1
			it.Parent = &p
		}
		items = append(items, it)
		n++
	}
	doc := map[string]any{
		"items":       items,
		"total":       n,
		"next_cursor": "eyJvZmZzZXQiOjUwMDB9",
		"meta":        map[string]any{"generated_at": "2026-03-01T12:00:00Z", "source": "inventory", "version": 3},
	}
	b, _ := json.Marshal(doc)
	return b
}

func textResult(texts ...string) Result {
	var r Result
	for _, t := range texts {
		raw, _ := json.Marshal(map[string]string{"type": "text", "text": t})
		r.Parts = append(r.Parts, Part{Type: PartText, Text: t, Raw: raw})
	}
	return r
}

func mustApply(t testing.TB, f *Firewall, owner string, r Result) Outcome {
	t.Helper()
	o, err := f.Apply(context.Background(), owner, r)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return o
}

func mustView(t testing.TB, f *Firewall, owner, handle string, raw string) ViewResult {
	t.Helper()
	sel, err := ParseSelector(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("ParseSelector(%s): %v", raw, err)
	}
	v, err := f.View(context.Background(), owner, handle, sel)
	if err != nil {
		t.Fatalf("View(%s): %v", raw, err)
	}
	return v
}
