// Package artifactstest is the conformance suite every artifacts.Store
// passes: the contract the context firewall and tool_view rely on, whatever
// keeps the bytes.
package artifactstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// Open returns a fresh, empty store configured by o (TTL, MaxBytes and Now
// are set by the suite; a backend fills in the rest). The suite closes it.
type Open func(t *testing.T, o artifacts.Options) artifacts.Store

// Clock is the fake clock the suite passes as Options.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock stopped at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// kib is the unit of the quota cases: small enough to be quick, large
// enough that chunked backends span several chunks for some sizes.
const kib = 1 << 10

// Run runs the suite against the stores open returns. Integrity checks of
// stored data (ErrCorrupt) are backend specific and not part of it.
func Run(t *testing.T, open Open) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Open)
	}{
		{"RoundTrip", testRoundTrip},
		{"DefaultMediaType", testDefaultMediaType},
		{"ReadAtBounds", testReadAtBounds},
		{"OwnerIsolation", testOwnerIsolation},
		{"Delete", testDelete},
		{"TTL", testTTL},
		{"Quota", testQuota},
		{"QuotaFreedByDelete", testQuotaFreedByDelete},
		{"QuotaFreedByExpiry", testQuotaFreedByExpiry},
		{"BadInput", testBadInput},
		{"Cancelled", testCancelled},
		{"Concurrent", testConcurrent},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// store opens a store with clk as its clock and closes it when t ends.
func store(t *testing.T, open Open, clk *Clock, mod func(*artifacts.Options)) artifacts.Store {
	t.Helper()
	o := artifacts.Options{Now: clk.Now}
	if mod != nil {
		mod(&o)
	}
	s := open(t, o)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Content returns size deterministic pseudo-random bytes for seed.
func Content(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x51))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func mustPut(t *testing.T, s artifacts.Store, owner string, data []byte) artifacts.Meta {
	t.Helper()
	m, err := s.Put(ctx(t), owner, artifacts.PutInput{MediaType: "text/plain", Label: "t", Data: data})
	if err != nil {
		t.Fatalf("Put(%d bytes): %v", len(data), err)
	}
	return m
}

// ReadAll streams owner's artifact through Open and closes the stream.
func ReadAll(ctx context.Context, s artifacts.Store, owner, handle string) ([]byte, error) {
	rc, err := s.Open(ctx, owner, handle)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return b, err
}

func mustReadAll(t *testing.T, s artifacts.Store, owner, handle string, want []byte) {
	t.Helper()
	got, err := ReadAll(ctx(t), s, owner, handle)
	if err != nil {
		t.Fatalf("Open/read %s: %v", handle, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Open/read %s: got %d bytes, want %d", handle, len(got), len(want))
	}
}

func mustBeGone(t *testing.T, s artifacts.Store, owner, handle string) {
	t.Helper()
	if _, err := s.Stat(ctx(t), owner, handle); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("Stat(%s) = %v, want ErrNotFound", handle, err)
	}
}

func testRoundTrip(t *testing.T, open Open) {
	clk := NewClock()
	s := store(t, open, clk, nil)
	c := ctx(t)
	// Sizes around the chunk sizes of the known backends (60 KiB, 1 MiB).
	sizes := []int{0, 1, 1000, 60*kib - 1, 60*kib + 1, 1<<20 - 1, 1 << 20, 1<<20 + 1, 5<<20/2 + 3}
	for i, size := range sizes {
		for _, body := range []bool{false, true} {
			name := "data/"
			if body {
				name = "body/"
			}
			t.Run(name+strconv.Itoa(size), func(t *testing.T) {
				want := Content(uint64(2*i+len(name)), size)
				in := artifacts.PutInput{MediaType: "application/json", Label: "result of x"}
				if body {
					in.Body, in.Size = iotest.HalfReader(bytes.NewReader(want)), int64(size)
				} else {
					in.Data = want
				}
				m, err := s.Put(c, "alice", in)
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				if err := artifacts.ValidateHandle(m.Handle); err != nil {
					t.Fatalf("handle %q: %v", m.Handle, err)
				}
				wantMeta := artifacts.Meta{
					Handle: m.Handle, Owner: "alice", MediaType: "application/json", SizeBytes: int64(size),
					Label: "result of x", ContentHash: sha(want), CreatedAt: clk.Now(), ExpiresAt: clk.Now().Add(artifacts.DefaultTTL),
				}
				if m != wantMeta {
					t.Fatalf("Put meta = %+v\nwant %+v", m, wantMeta)
				}
				st, err := s.Stat(c, "alice", m.Handle)
				if err != nil || st != m {
					t.Fatalf("Stat = %+v, %v; want %+v", st, err, m)
				}
				mustReadAll(t, s, "alice", m.Handle, want)
				n := int64(size)
				for _, r := range [][2]int64{{0, 0}, {0, 1}, {0, n}, {n / 3, 100}, {60*kib - 1, 2}, {1<<20 - 1, 2}, {n / 2, 70 * kib}, {n, 10}} {
					if r[0] > n || r[1] > artifacts.MaxReadBytes {
						continue
					}
					got, err := s.ReadAt(c, "alice", m.Handle, r[0], r[1])
					if err != nil {
						t.Fatalf("ReadAt(%d,%d): %v", r[0], r[1], err)
					}
					end := min(r[0]+r[1], n)
					if !bytes.Equal(got, want[r[0]:end]) {
						t.Fatalf("ReadAt(%d,%d) = %d bytes, want %d", r[0], r[1], len(got), end-r[0])
					}
				}
			})
		}
	}
	// Every Put has a handle of its own, even for the same content.
	a, b := mustPut(t, s, "alice", []byte("same")), mustPut(t, s, "alice", []byte("same"))
	if a.Handle == b.Handle {
		t.Fatal("two Puts share a handle")
	}
}

func testDefaultMediaType(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	m, err := s.Put(ctx(t), "alice", artifacts.PutInput{Data: []byte("x")})
	if err != nil || m.MediaType != artifacts.DefaultMediaType {
		t.Fatalf("Put = %+v, %v; want media type %q", m, err, artifacts.DefaultMediaType)
	}
}

func testReadAtBounds(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	c := ctx(t)
	want := Content(2, 2<<20+10)
	m := mustPut(t, s, "alice", want)
	empty := mustPut(t, s, "alice", nil)
	size := int64(len(want))
	cases := []struct {
		name   string
		handle string
		off, n int64
		want   []byte
	}{
		{"exact end", m.Handle, size, 5, []byte{}},
		{"straddles end", m.Handle, size - 3, 100, want[size-3:]},
		{"last chunk only", m.Handle, 2 << 20, 1 << 20, want[2<<20:]},
		{"across chunks", m.Handle, 1<<20 - 5, 10, want[1<<20-5 : 1<<20+5]},
		{"max read", m.Handle, 1, artifacts.MaxReadBytes, want[1:]},
		{"zero length", m.Handle, 7, 0, []byte{}},
		{"empty artifact", empty.Handle, 0, 10, []byte{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ReadAt(c, "alice", tc.handle, tc.off, tc.n)
			if err != nil || got == nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("ReadAt = %d bytes (nil=%v), %v; want %d bytes", len(got), got == nil, err, len(tc.want))
			}
		})
	}
	for name, call := range map[string]func() error{
		"past the end":          func() error { _, err := s.ReadAt(c, "alice", m.Handle, size+1, 1); return err },
		"far past the end":      func() error { _, err := s.ReadAt(c, "alice", m.Handle, 1<<62, 1); return err },
		"past an empty one":     func() error { _, err := s.ReadAt(c, "alice", empty.Handle, 1, 1); return err },
		"negative offset":       func() error { _, err := s.ReadAt(c, "alice", m.Handle, -1, 1); return err },
		"negative length":       func() error { _, err := s.ReadAt(c, "alice", m.Handle, 0, -1); return err },
		"longer than MaxReadBy": func() error { _, err := s.ReadAt(c, "alice", m.Handle, 0, artifacts.MaxReadBytes+1); return err },
	} {
		want := artifacts.ErrInvalid
		if strings.HasPrefix(name, "past") || strings.HasPrefix(name, "far") {
			want = artifacts.ErrOutOfRange
		}
		if err := call(); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}

// testOwnerIsolation checks that another principal's handle is
// indistinguishable from a missing one through every method.
func testOwnerIsolation(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	c := ctx(t)
	want := Content(3, 5000)
	m := mustPut(t, s, "alice", want)
	missing := artifacts.NewHandle()
	probes := map[string]func(owner, handle string) error{
		"stat":   func(o, h string) error { _, err := s.Stat(c, o, h); return err },
		"readat": func(o, h string) error { _, err := s.ReadAt(c, o, h, 0, 10); return err },
		"open":   func(o, h string) error { _, err := s.Open(c, o, h); return err },
		"delete": func(o, h string) error { return s.Delete(c, o, h) },
	}
	for name, p := range probes {
		t.Run(name, func(t *testing.T) {
			foreign, absent, absentOwn := p("mallory", m.Handle), p("mallory", missing), p("alice", missing)
			if !errors.Is(foreign, artifacts.ErrNotFound) {
				t.Fatalf("foreign handle: %v", foreign)
			}
			if foreign.Error() != absent.Error() || foreign.Error() != absentOwn.Error() {
				t.Fatalf("distinguishable: foreign %q, absent %q, absent own %q", foreign, absent, absentOwn)
			}
		})
	}
	for _, owner := range []string{"alic", "alice\x00", "Alice"} {
		if _, err := s.Stat(c, owner, m.Handle); !errors.Is(err, artifacts.ErrNotFound) {
			t.Fatalf("owner %q: %v", owner, err)
		}
	}
	mustReadAll(t, s, "alice", m.Handle, want) // mallory's Delete did nothing
}

func testDelete(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	c := ctx(t)
	a, b := mustPut(t, s, "alice", Content(4, 3000)), mustPut(t, s, "alice", Content(5, 3000))
	if err := s.Delete(c, "alice", a.Handle); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustBeGone(t, s, "alice", a.Handle)
	if _, err := s.ReadAt(c, "alice", a.Handle, 0, 1); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("ReadAt after Delete: %v", err)
	}
	if err := s.Delete(c, "alice", a.Handle); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	mustReadAll(t, s, "alice", b.Handle, Content(5, 3000))
}

func testTTL(t *testing.T, open Open) {
	clk := NewClock()
	s := store(t, open, clk, func(o *artifacts.Options) { o.TTL = time.Hour })
	c := ctx(t)
	want := Content(6, 70*kib)
	m := mustPut(t, s, "alice", want)
	if !m.ExpiresAt.Equal(m.CreatedAt.Add(time.Hour)) {
		t.Fatalf("ExpiresAt %v, CreatedAt %v", m.ExpiresAt, m.CreatedAt)
	}
	clk.Add(30 * time.Minute)
	young := mustPut(t, s, "alice", Content(7, 10))
	clk.Add(30*time.Minute - time.Nanosecond)
	mustReadAll(t, s, "alice", m.Handle, want)
	clk.Add(time.Nanosecond)
	for name, err := range map[string]error{
		"stat":   func() error { _, err := s.Stat(c, "alice", m.Handle); return err }(),
		"readat": func() error { _, err := s.ReadAt(c, "alice", m.Handle, 0, 1); return err }(),
		"open":   func() error { _, err := s.Open(c, "alice", m.Handle); return err }(),
		"delete": s.Delete(c, "alice", m.Handle),
	} {
		if !errors.Is(err, artifacts.ErrNotFound) {
			t.Errorf("%s after expiry: %v", name, err)
		}
	}
	mustReadAll(t, s, "alice", young.Handle, Content(7, 10))
}

func testQuota(t *testing.T, open Open) {
	clk := NewClock()
	s := store(t, open, clk, func(o *artifacts.Options) { o.MaxBytes = 100 * kib })
	c := ctx(t)
	var metas []artifacts.Meta
	for i := range 3 {
		metas = append(metas, mustPut(t, s, "alice", Content(uint64(10+i), 40*kib)))
		clk.Add(time.Second)
	}
	mustBeGone(t, s, "alice", metas[0].Handle) // expires soonest: evicted
	for _, m := range metas[1:] {
		if _, err := s.Stat(c, "alice", m.Handle); err != nil {
			t.Fatalf("newer artifact evicted: %v", err)
		}
	}
	// Larger than the quota itself: refused before anything is read or
	// written, and nothing is evicted.
	for name, in := range map[string]artifacts.PutInput{
		"data": {Data: make([]byte, 100*kib+1)},
		"body": {Body: iotest.ErrReader(errors.New("must not be read")), Size: 100*kib + 1},
	} {
		if _, err := s.Put(c, "alice", in); !errors.Is(err, artifacts.ErrTooLarge) {
			t.Fatalf("%s: %v, want ErrTooLarge", name, err)
		}
	}
	for _, m := range metas[1:] {
		if _, err := s.Stat(c, "alice", m.Handle); err != nil {
			t.Fatalf("a refused Put evicted an artifact: %v", err)
		}
	}
	// Exactly the quota fits, evicting everything else.
	full := mustPut(t, s, "bob", Content(20, 100*kib))
	for _, m := range metas[1:] {
		mustBeGone(t, s, "alice", m.Handle)
	}
	mustReadAll(t, s, "bob", full.Handle, Content(20, 100*kib))
	clk.Add(time.Second)
	small := mustPut(t, s, "carol", Content(21, 100))
	mustBeGone(t, s, "bob", full.Handle)
	mustReadAll(t, s, "carol", small.Handle, Content(21, 100))
}

func testQuotaFreedByDelete(t *testing.T, open Open) {
	clk := NewClock()
	s := store(t, open, clk, func(o *artifacts.Options) { o.MaxBytes = 100 * kib })
	c := ctx(t)
	a := mustPut(t, s, "alice", Content(30, 60*kib))
	clk.Add(time.Second)
	if err := s.Delete(c, "alice", a.Handle); err != nil {
		t.Fatal(err)
	}
	b := mustPut(t, s, "alice", Content(31, 60*kib))
	clk.Add(time.Second)
	d := mustPut(t, s, "alice", Content(32, 40*kib))
	// The deleted artifact's bytes were freed: nothing had to be evicted.
	mustReadAll(t, s, "alice", b.Handle, Content(31, 60*kib))
	mustReadAll(t, s, "alice", d.Handle, Content(32, 40*kib))
}

func testQuotaFreedByExpiry(t *testing.T, open Open) {
	clk := NewClock()
	s := store(t, open, clk, func(o *artifacts.Options) { o.MaxBytes = 100 * kib; o.TTL = time.Minute })
	a := mustPut(t, s, "alice", Content(40, 60*kib))
	clk.Add(2 * time.Minute)
	mustBeGone(t, s, "alice", a.Handle)
	b := mustPut(t, s, "alice", Content(41, 60*kib))
	d := mustPut(t, s, "alice", Content(42, 40*kib))
	mustReadAll(t, s, "alice", b.Handle, Content(41, 60*kib))
	mustReadAll(t, s, "alice", d.Handle, Content(42, 40*kib))
}

func testBadInput(t *testing.T, open Open) {
	const quota = 4 << 20
	s := store(t, open, NewClock(), func(o *artifacts.Options) { o.MaxBytes = quota })
	c := ctx(t)
	good := Content(1, 3000)
	m := mustPut(t, s, "alice", good)
	unknown := artifacts.NewHandle()
	big := 3<<20 + 5 // spans chunks in every backend
	put := func(owner string, in artifacts.PutInput) func() error {
		return func() error { _, err := s.Put(c, owner, in); return err }
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"put empty owner", put("", artifacts.PutInput{Data: []byte("x")}), artifacts.ErrInvalid},
		{"put long owner", put(strings.Repeat("o", artifacts.MaxOwnerBytes+1), artifacts.PutInput{Data: []byte("x")}), artifacts.ErrInvalid},
		{"put data and body", put("alice", artifacts.PutInput{Data: []byte("x"), Body: strings.NewReader("x"), Size: 1}), artifacts.ErrInvalid},
		{"put negative size", put("alice", artifacts.PutInput{Body: strings.NewReader("x"), Size: -1}), artifacts.ErrInvalid},
		{"put short body small", put("alice", artifacts.PutInput{Body: strings.NewReader("xy"), Size: 3}), artifacts.ErrInvalid},
		{"put long body small", put("alice", artifacts.PutInput{Body: strings.NewReader("xyzw"), Size: 3}), artifacts.ErrInvalid},
		{"put short body chunked", put("alice", artifacts.PutInput{Body: bytes.NewReader(make([]byte, big-1)), Size: int64(big)}), artifacts.ErrInvalid},
		{"put long body chunked", put("alice", artifacts.PutInput{Body: bytes.NewReader(make([]byte, big+1)), Size: int64(big)}), artifacts.ErrInvalid},
		{"put failing body", put("alice", artifacts.PutInput{Body: iotest.ErrReader(io.ErrUnexpectedEOF), Size: int64(big)}), artifacts.ErrInvalid},
		{"put long media type", put("alice", artifacts.PutInput{MediaType: strings.Repeat("m", artifacts.MaxMediaTypeBytes+1)}), artifacts.ErrInvalid},
		{"put control in media type", put("alice", artifacts.PutInput{MediaType: "text/plain\nX-Evil: 1"}), artifacts.ErrInvalid},
		{"put long label", put("alice", artifacts.PutInput{Label: strings.Repeat("l", artifacts.MaxLabelBytes+1)}), artifacts.ErrInvalid},
		{"stat empty owner", func() error { _, err := s.Stat(c, "", m.Handle); return err }, artifacts.ErrInvalid},
		{"stat malformed", func() error { _, err := s.Stat(c, "alice", "art_nope"); return err }, artifacts.ErrInvalid},
		{"stat unknown", func() error { _, err := s.Stat(c, "alice", unknown); return err }, artifacts.ErrNotFound},
		{"read malformed", func() error { _, err := s.ReadAt(c, "alice", "../etc/passwd", 0, 1); return err }, artifacts.ErrInvalid},
		{"read unknown", func() error { _, err := s.ReadAt(c, "alice", unknown, 0, 1); return err }, artifacts.ErrNotFound},
		{"open empty owner", func() error { _, err := s.Open(c, "", m.Handle); return err }, artifacts.ErrInvalid},
		{"open malformed", func() error { _, err := s.Open(c, "alice", ""); return err }, artifacts.ErrInvalid},
		{"open unknown", func() error { _, err := s.Open(c, "alice", unknown); return err }, artifacts.ErrNotFound},
		{"delete malformed", func() error { return s.Delete(c, "alice", "art_"+strings.Repeat("A", 26)) }, artifacts.ErrInvalid},
		{"delete unknown", func() error { return s.Delete(c, "alice", unknown) }, artifacts.ErrNotFound},
		{"delete empty owner", func() error { return s.Delete(c, "", m.Handle) }, artifacts.ErrInvalid},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// The refused Puts hold no quota: the rest of it fits without evicting
	// the one good artifact.
	rest := mustPut(t, s, "alice", Content(2, quota-len(good)))
	mustReadAll(t, s, "alice", m.Handle, good)
	if _, err := s.Stat(c, "alice", rest.Handle); err != nil {
		t.Fatal(err)
	}
}

func testCancelled(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	m := mustPut(t, s, "alice", Content(60, 3000))
	c, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range map[string]func() error{
		"put":    func() error { _, err := s.Put(c, "alice", artifacts.PutInput{Data: []byte("x")}); return err },
		"stat":   func() error { _, err := s.Stat(c, "alice", m.Handle); return err },
		"readat": func() error { _, err := s.ReadAt(c, "alice", m.Handle, 0, 1); return err },
		"open":   func() error { _, err := s.Open(c, "alice", m.Handle); return err },
		"delete": func() error { return s.Delete(c, "alice", m.Handle) },
	} {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
	// A stream stops when its context ends.
	c2, cancel2 := context.WithCancel(context.Background())
	rc, err := s.Open(c2, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream after cancel: %v", err)
	}
	_ = rc.Close()
	mustReadAll(t, s, "alice", m.Handle, Content(60, 3000))
}

func testConcurrent(t *testing.T, open Open) {
	s := store(t, open, NewClock(), nil)
	c := ctx(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := "owner" + strconv.Itoa(g)
			for i := range 5 {
				want := Content(uint64(100*g+i), 1000*(i+1)+g)
				m, err := s.Put(c, owner, artifacts.PutInput{Data: want})
				if err != nil {
					t.Error(err)
					return
				}
				got, err := ReadAll(c, s, owner, m.Handle)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("read back: %d bytes, %v", len(got), err)
					return
				}
				if i%2 == 0 {
					if err := s.Delete(c, owner, m.Handle); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
}

func testClosed(t *testing.T, open Open) {
	s := open(t, artifacts.Options{})
	c := ctx(t)
	m := mustPut(t, s, "alice", Content(70, 3000))
	rc, err := s.Open(c, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, call := range map[string]func() error{
		"put":    func() error { _, err := s.Put(c, "alice", artifacts.PutInput{Data: []byte("x")}); return err },
		"stat":   func() error { _, err := s.Stat(c, "alice", m.Handle); return err },
		"readat": func() error { _, err := s.ReadAt(c, "alice", m.Handle, 0, 1); return err },
		"open":   func() error { _, err := s.Open(c, "alice", m.Handle); return err },
		"delete": func() error { return s.Delete(c, "alice", m.Handle) },
		"stream": func() error { _, err := io.ReadAll(rc); return err },
	} {
		if err := call(); !errors.Is(err, artifacts.ErrClosed) {
			t.Errorf("%s: %v, want ErrClosed", name, err)
		}
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("stream Close after store Close: %v", err)
	}
	if _, err := rc.Read(make([]byte, 1)); !errors.Is(err, artifacts.ErrClosed) {
		t.Fatalf("Read after stream Close: %v", err)
	}
}
