// Package statetest is the conformance suite every state.KV backend
// passes: the semantics the kinds of state built on it rely on.
package statetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Open returns a fresh, empty store for one subtest; the suite closes it.
type Open func(t *testing.T) state.KV

// Run runs the suite against the stores open returns. Real time passes in
// the expiry and window cases (a few hundred milliseconds).
func Run(t *testing.T, open Open) {
	cases := []struct {
		name string
		fn   func(t *testing.T, kv state.KV)
	}{
		{"GetMissing", testGetMissing},
		{"SetGet", testSetGet},
		{"Create", testCreate},
		{"Swap", testSwap},
		{"Delete", testDelete},
		{"Expiry", testExpiry},
		{"Scan", testScan},
		{"Admit", testAdmit},
		{"AdmitMany", testAdmitMany},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentSwap", testConcurrentSwap},
		{"ConcurrentAdmit", testConcurrentAdmit},
		{"BadInput", testBadInput},
		{"Cancelled", testCancelled},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv := open(t)
			if c.name != "Closed" {
				t.Cleanup(func() { kv.Close() })
			}
			c.fn(t, kv)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func testGetMissing(t *testing.T, kv state.KV) {
	if _, err := kv.Get(ctx(t), "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
	}
}

func testSetGet(t *testing.T, kv state.KV) {
	c := ctx(t)
	for _, v := range [][]byte{[]byte("v1"), {0, 1, 0, 255}, {}, bytes.Repeat([]byte{'x'}, 1<<20)} {
		if err := kv.Set(c, "k", v, 0); err != nil {
			t.Fatal(err)
		}
		got, err := kv.Get(c, "k")
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Get = %d bytes, %v; want %d bytes", len(got), err, len(v))
		}
	}
	// The returned slice is the caller's.
	got, _ := kv.Get(c, "k")
	got[0] = 'y'
	again, _ := kv.Get(c, "k")
	if again[0] != 'x' {
		t.Fatal("Get returned a slice aliasing the store")
	}
}

func testCreate(t *testing.T, kv state.KV) {
	c := ctx(t)
	ok, err := kv.Create(c, "k", []byte("first"), 0)
	if err != nil || !ok {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	ok, err = kv.Create(c, "k", []byte("second"), 0)
	if err != nil || ok {
		t.Fatalf("second Create = %v, %v; want false", ok, err)
	}
	if got, _ := kv.Get(c, "k"); string(got) != "first" {
		t.Fatalf("value = %q", got)
	}
}

func testSwap(t *testing.T, kv state.KV) {
	c := ctx(t)
	mustSwap := func(old, val []byte, want bool) {
		t.Helper()
		ok, err := kv.Swap(c, "k", old, val, 0)
		if err != nil || ok != want {
			t.Fatalf("Swap(%q -> %q) = %v, %v; want %v", old, val, ok, err, want)
		}
	}
	mustSwap([]byte("a"), []byte("b"), false) // missing key, non-nil old
	mustSwap(nil, []byte("a"), true)          // nil old creates
	mustSwap(nil, []byte("z"), false)         // exists now
	mustSwap([]byte("x"), []byte("b"), false) // wrong old
	mustSwap([]byte("a"), []byte("b"), true)
	if got, _ := kv.Get(c, "k"); string(got) != "b" {
		t.Fatalf("value = %q", got)
	}
	mustSwap([]byte("b"), nil, true) // nil val deletes
	if _, err := kv.Get(c, "k"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("after delete-swap: %v", err)
	}
	// An empty value is a value, distinct from absence.
	mustSwap(nil, []byte{}, true)
	mustSwap([]byte{}, []byte("c"), true)
}

func testDelete(t *testing.T, kv state.KV) {
	c := ctx(t)
	if err := kv.Delete(c, "missing"); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
	_ = kv.Set(c, "k", []byte("v"), 0)
	if err := kv.Delete(c, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(c, "k"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
}

func testExpiry(t *testing.T, kv state.KV) {
	c := ctx(t)
	const ttl = 150 * time.Millisecond
	if err := kv.Set(c, "set", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	if ok, err := kv.Create(c, "created", []byte("v"), ttl); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := kv.Swap(c, "swapped", nil, []byte("v"), ttl); !ok || err != nil {
		t.Fatal(ok, err)
	}
	_ = kv.Set(c, "kept", []byte("v"), 0)
	if _, err := kv.Get(c, "set"); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	time.Sleep(ttl + 250*time.Millisecond)
	for _, k := range []string{"set", "created", "swapped"} {
		if _, err := kv.Get(c, k); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("%s after expiry: %v", k, err)
		}
	}
	if ok, err := kv.Create(c, "created", []byte("again"), 0); !ok || err != nil {
		t.Fatalf("Create after expiry = %v, %v", ok, err)
	}
	if ok, err := kv.Swap(c, "swapped", nil, []byte("again"), 0); !ok || err != nil {
		t.Fatalf("Swap(nil) after expiry = %v, %v", ok, err)
	}
	if es, err := kv.Scan(c, "se", 10); err != nil || len(es) != 0 {
		t.Fatalf("Scan after expiry = %v, %v", es, err)
	}
	if _, err := kv.Get(c, "kept"); err != nil {
		t.Fatalf("no-ttl key: %v", err)
	}
}

func testScan(t *testing.T, kv state.KV) {
	c := ctx(t)
	for i := 9; i >= 0; i-- {
		_ = kv.Set(c, fmt.Sprintf("p/%02d", i), []byte{byte(i)}, 0)
	}
	_ = kv.Set(c, "q/1", []byte("other"), 0)
	_ = kv.Set(c, "p", []byte("exact prefix"), 0)
	es, err := kv.Scan(c, "p/", 100)
	if err != nil || len(es) != 10 {
		t.Fatalf("Scan = %d entries, %v", len(es), err)
	}
	for i, e := range es {
		if e.Key != fmt.Sprintf("p/%02d", i) || !bytes.Equal(e.Value, []byte{byte(i)}) {
			t.Fatalf("entry %d = %q %v", i, e.Key, e.Value)
		}
	}
	if es, _ := kv.Scan(c, "p/", 3); len(es) != 3 || es[2].Key != "p/02" {
		t.Fatalf("Scan limit 3 = %v", es)
	}
	if es, _ := kv.Scan(c, "none/", 10); len(es) != 0 {
		t.Fatalf("Scan(none) = %v", es)
	}
}

func testAdmit(t *testing.T, kv state.KV) {
	c := ctx(t)
	const window = 400 * time.Millisecond
	req := func(take bool) state.AdmitRequest {
		return state.AdmitRequest{Keys: []string{"w"}, Limits: []int{3}, Window: window, Now: time.Now(), Take: take}
	}
	// A check counts nothing.
	for range 5 {
		if r, err := kv.Admit(c, req(false)); err != nil || r.Denied != -1 {
			t.Fatalf("check = %+v, %v", r, err)
		}
	}
	for i := range 3 {
		if r, err := kv.Admit(c, req(true)); err != nil || r.Denied != -1 {
			t.Fatalf("take %d = %+v, %v", i, r, err)
		}
	}
	for _, take := range []bool{false, true} {
		r, err := kv.Admit(c, req(take))
		if err != nil || r.Denied != 0 {
			t.Fatalf("over the limit (take=%v) = %+v, %v", take, r, err)
		}
		if r.RetryAfter <= 0 || r.RetryAfter > window {
			t.Fatalf("RetryAfter = %v, want in (0, %v]", r.RetryAfter, window)
		}
	}
	time.Sleep(window + 100*time.Millisecond)
	if r, err := kv.Admit(c, req(true)); err != nil || r.Denied != -1 {
		t.Fatalf("after the window = %+v, %v", r, err)
	}
}

func testAdmitMany(t *testing.T, kv state.KV) {
	c := ctx(t)
	req := state.AdmitRequest{Keys: []string{"a", "b"}, Limits: []int{5, 2}, Window: time.Minute, Now: time.Now(), Take: true}
	for i := range 2 {
		if r, err := kv.Admit(c, req); err != nil || r.Denied != -1 {
			t.Fatalf("take %d = %+v, %v", i, r, err)
		}
	}
	// b is full: refused, and a does not count the refused call.
	for range 3 {
		req.Now = time.Now()
		if r, err := kv.Admit(c, req); err != nil || r.Denied != 1 {
			t.Fatalf("b full = %+v, %v", r, err)
		}
	}
	only := state.AdmitRequest{Keys: []string{"a"}, Limits: []int{5}, Window: time.Minute, Now: time.Now(), Take: true}
	for i := range 3 {
		if r, err := kv.Admit(c, only); err != nil || r.Denied != -1 {
			t.Fatalf("a alone, take %d = %+v, %v (refused calls were counted)", i, r, err)
		}
	}
	if r, _ := kv.Admit(c, only); r.Denied != 0 {
		t.Fatalf("a sixth call = %+v", r)
	}
}

func testConcurrentCreate(t *testing.T, kv state.KV) { RaceCreate(t, kv) }

// RaceCreate makes 64 concurrent Creates of one key, spread over kvs (one
// store, or several clients of one shared store: replicas, processes),
// and fails t unless exactly one wins.
func RaceCreate(t *testing.T, kvs ...state.KV) {
	t.Helper()
	c := ctx(t)
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := kvs[i%len(kvs)].Create(c, "once", []byte{byte(i)}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of 64 concurrent Creates over %d stores won", won.Load(), len(kvs))
	}
}

func testConcurrentSwap(t *testing.T, kv state.KV) {
	c := ctx(t)
	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				old, err := kv.Get(c, "counter")
				if errors.Is(err, state.ErrNotFound) {
					old = nil
				} else if err != nil {
					t.Error(err)
					return
				}
				val := append(bytes.Clone(old), '+')
				ok, err := kv.Swap(c, "counter", old, val, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					return
				}
			}
		}()
	}
	wg.Wait()
	got, _ := kv.Get(c, "counter")
	if string(got) != strings.Repeat("+", n) {
		t.Fatalf("counter = %q, want %d increments", got, n)
	}
}

func testConcurrentAdmit(t *testing.T, kv state.KV) {
	RaceAdmit(t, func(int) state.AdmitRequest {
		return state.AdmitRequest{Keys: []string{"w"}, Limits: []int{10}, Window: time.Minute, Now: time.Now(), Take: true}
	}, 10, kv)
}

// RaceAdmit makes 64 concurrent Admits, call i asking req(i) of
// kvs[i%len(kvs)], and fails t unless exactly want are admitted.
func RaceAdmit(t *testing.T, req func(i int) state.AdmitRequest, want int, kvs ...state.KV) {
	t.Helper()
	c := ctx(t)
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := kvs[i%len(kvs)].Admit(c, req(i))
			if err != nil {
				t.Error(err)
			}
			if r.Denied == -1 {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if int(admitted.Load()) != want {
		t.Fatalf("%d of 64 concurrent calls over %d stores admitted, want %d", admitted.Load(), len(kvs), want)
	}
}

func testBadInput(t *testing.T, kv state.KV) {
	c := ctx(t)
	long := strings.Repeat("k", state.MaxKeyBytes+1)
	big := make([]byte, state.MaxValueBytes+1)
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"Get empty key", second(kv.Get(c, "")), state.ErrInvalid},
		{"Get long key", second(kv.Get(c, long)), state.ErrTooLarge},
		{"Set big value", kv.Set(c, "k", big, 0), state.ErrTooLarge},
		{"Set negative ttl", kv.Set(c, "k", []byte("v"), -time.Second), state.ErrInvalid},
		{"Create empty key", second(kv.Create(c, "", []byte("v"), 0)), state.ErrInvalid},
		{"Swap big value", second(kv.Swap(c, "k", nil, big, 0)), state.ErrTooLarge},
		{"Delete long key", kv.Delete(c, long), state.ErrTooLarge},
		{"Scan limit 0", second(kv.Scan(c, "", 0)), state.ErrInvalid},
		{"Scan limit too big", second(kv.Scan(c, "", state.MaxScan+1)), state.ErrInvalid},
		{"Admit no keys", second(kv.Admit(c, state.AdmitRequest{Window: time.Second})), state.ErrInvalid},
		{"Admit unpaired", second(kv.Admit(c, state.AdmitRequest{Keys: []string{"a"}, Limits: []int{1, 2}, Window: time.Second})), state.ErrInvalid},
		{"Admit zero limit", second(kv.Admit(c, state.AdmitRequest{Keys: []string{"a"}, Limits: []int{0}, Window: time.Second})), state.ErrInvalid},
		{"Admit zero window", second(kv.Admit(c, state.AdmitRequest{Keys: []string{"a"}, Limits: []int{1}})), state.ErrInvalid},
	}
	for _, ch := range checks {
		if !errors.Is(ch.err, ch.want) {
			t.Errorf("%s: %v, want %v", ch.name, ch.err, ch.want)
		}
	}
	if _, err := kv.Get(c, "k"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a refused write wrote something: %v", err)
	}
}

func testCancelled(t *testing.T, kv state.KV) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := kv.Set(c, "k", []byte("v"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Set with a cancelled context = %v", err)
	}
	if _, err := kv.Get(ctx(t), "k"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a cancelled Set wrote: %v", err)
	}
}

func testClosed(t *testing.T, kv state.KV) {
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx(t), "k"); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

func second[T any](_ T, err error) error { return err }
